"""locojax: feed-forward 3D Gaussian Splatting in JAX/Flax.

Sub-packages (each one job):
  types      shared pytrees: Gaussians, Camera, RenderOutput, Views, Batch
  geometry   camera conventions, intrinsics, Plücker rays, scene normalisation
  render     differentiable tile rasterizer with gsplat 1.5.3 semantics
  metrics    PSNR / SSIM / LPIPS as the pixelSplat evaluation code computes them
  losses     family-neutral loss terms (MSE, D-SSIM, LPIPS, visibility)
  models     GlobalSplat (and, later, LoCoSplat, LocusGS/TokenGS)
"""

__version__ = "0.1.0"

from locojax import types  # noqa: F401  (cheap; everything else is imported lazily)


def __getattr__(name):  # lazy sub-package import keeps `import locojax` fast
    import importlib

    if name in {"render", "geometry", "metrics", "losses", "models", "train"}:
        return importlib.import_module(f"locojax.{name}")
    raise AttributeError(f"module 'locojax' has no attribute {name!r}")
