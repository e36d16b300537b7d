"""Image metrics as the pixelSplat evaluation code (inherited by every paper here) computes them.

    from locojax import metrics
    metrics.psnr(pred, target)    # [..., H, W, 3] float in [0, 1] -> [...]
    metrics.ssim(pred, target)    # skimage structural_similarity(win_size=11, gaussian_weights=True)
    metrics.lpips(pred, target)   # lpips.LPIPS(net="vgg"), v0.1 heads, normalize=True

All are jittable and vmappable; ssim and lpips are differentiable (lpips only through `pred`).
Also here: `diagnostics` (LocusGS C_centroid, LoCoSplat depth-branch health) and `paired`
(per-scene paired comparison of two result files; `python -m locojax.metrics.paired A B`).
"""

from locojax.metrics.lpips import lpips, lpips_with_params
from locojax.metrics.lpips_weights import lpips_vgg_params
from locojax.metrics.psnr import psnr
from locojax.metrics.ssim import ssim, ssim_map

__all__ = ["psnr", "ssim", "ssim_map", "lpips", "lpips_with_params", "lpips_vgg_params"]
