"""Family-neutral loss terms; a family combines them with weights from its config.

    from locojax import losses
    losses.mse(pred, target)                        # scalar
    losses.dssim(pred, target, padding="same")      # (1 - SSIM) / 2, scalar
    losses.lpips(pred, target, params=lpips_params) # scalar, gradients into pred only
    losses.visibility_loss(points, c2w, intrinsics) # TokenGS/LocusGS eqs. 27-28, [...]

  photometric  mse, dssim ('valid' skimage or 'same' fused-ssim SSIM), lpips
  visibility   out_of_view_penalty (eq. 27), visibility_loss (eq. 28, clamped as TokenGS)

Family-specific objectives live with the family: `locojax/models/<family>/` (e.g.
`locojax.models.globalsplat.losses`), their paper weights as the defaults of the family's
`LossConfig` (`locojax/models/<family>/config.py`, `config.loss`).
"""

from locojax.losses.photometric import dssim, lpips, mse
from locojax.losses.visibility import out_of_view_penalty, visibility_loss

__all__ = ["mse", "dssim", "lpips", "out_of_view_penalty", "visibility_loss"]
