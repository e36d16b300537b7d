"""Training losses. Each loss is a pure function whose weights are arguments (copied from configs).

  rendering   MSE + lambda * LPIPS (LoCoSplat, GlobalSplat), MSE + 0.2 * (1 - SSIM) (LocusGS/TokenGS)
  visibility  LocusGS/TokenGS visibility regularisation over Gaussian and anchor centres (eqs. 27-29)
  globalsplat GlobalSplat's regularisers and two-subset consistency loss (written by the GlobalSplat
              engineer; imported lazily so this package never depends on it)
"""

from locojax.losses.rendering import (
    GLOBALSPLAT,
    LOCOSPLAT,
    LOCUSGS,
    locosplat_loss,
    mse,
    mse_lpips_loss,
    mse_ssim_loss,
    rendering_loss,
)
from locojax.losses.visibility import (
    locusgs_visibility_regularizer,
    out_of_view_penalty,
    supervised_layer_weights,
    visibility_loss,
)


def __getattr__(name):
    if name == "globalsplat":
        import importlib

        return importlib.import_module("locojax.losses.globalsplat")
    raise AttributeError(f"module 'locojax.losses' has no attribute {name!r}")
