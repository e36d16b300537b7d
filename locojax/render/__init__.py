"""Differentiable Gaussian rasterizer with gsplat 1.5.3 semantics (3DGS pinhole, classic mode).

Public API
----------
    out = rasterize(gaussians, camera, *, width, height, sh_degree, background=None,
                    near=0.01, far=1e10, eps2d=0.3,
                    tile_size=16, max_pairs=None, tile_capacity=None, chunk=16,
                    subtile_size=None)                                          # one camera
    out = rasterize_batch(gaussians[S], cameras[S, V], ...)                      # RenderOutput[S, V]
    out.rgb [H, W, 3], out.depth [H, W, 1] ("ED": sum w z / alpha), out.alpha [H, W, 1],
    out.overflow [] int32 (Gaussian-tile pairs dropped), out.num_invalid [] int32.

Semantics (gsplat `_torch_impl.py`, `ProjectionEWA3DGSFused.cu`, `RasterizeToPixels3DGSFwd.cu`):
covariance R S S^T R^T from the normalised quaternion; EWA projection with gsplat's clamping of
x/z, y/z to 1.3x the frustum before the Jacobian; eps2d added to the 2D covariance; near/far culling
on camera z; pixel centres at (x + 0.5, y + 0.5); alpha = min(0.999, o exp(-sigma)), skipped when
sigma < 0 or alpha < 1/255; front to back in depth order, stopping (current Gaussian excluded) once
T would fall to 1e-4 or below; colour max(SH(mean - camera centre) + 0.5, 0); background added as
T_final * background. Tile assignment uses gsplat CUDA's opacity-aware 3-sigma box, outside which
no Gaussian reaches alpha 1/255, so nothing gsplat draws is culled. Gaussians with a non-finite
field are dropped (opacity 0, zero gradient) and counted in `num_invalid`.

Layering (as gsplat's): `rasterize` / `rasterize_batch` (rasterize.py) call three primitives,
each replaceable on its own (e.g. by a Pallas kernel):
  1. `project_gaussians` (projection.py, sh.py): world -> screen-space means, conics, depths,
     opacities, colours, radii. Plain jnp; gradients by autodiff.
  2. `bin_gaussians` (binning.py): depth-ordered Gaussian-tile pairs in a static buffer of
     `max_pairs` (default max(16384, min(8 N, 2 x tiles x tile_capacity)) per image), stable-sorted
     by tile; each tile keeps its nearest `tile_capacity` (default 4096). Dropped pairs are the
     farthest and are counted in `overflow`. Each tile's list is then split into the lists of its
     `subtile_size` sub-tiles (default 8 x 8 where 8 divides tile_size) by an exact
     Gaussian-rectangle test, without a second sort. Not differentiable (index data only), as in
     gsplat.
  3. `composite_tiles` (composite.py): front-to-back blending of all (sub-)tiles of all images at
     once, `chunk` Gaussians per tile per step, with early exit when every tile of a block is done;
     a custom VJP re-walks the lists front to back with the closed-form blending gradient, so
     backward memory is O(images x pixels + N + pairs), never pixels x Gaussians.
  `backend=` ("auto", "xla", "pallas") picks the compositing implementation per platform at
     lowering time (composite_backends.py; Pallas Triton kernels in pallas/triton_composite.py).
`rasterize_dense` (dense.py) is the O(pixels x N) pure-jnp reference with the same semantics.

jit and vmap: everything is static-shaped. `rasterize_batch` renders S x V images in one compositing
loop and is the efficient batched path; `jax.vmap(rasterize)` works too (the loop then runs until
the slowest image is done).
"""

from locojax.render.binning import TileBins, bin_gaussians
from locojax.render.composite import composite_tiles
from locojax.render.dense import composite_dense, rasterize_dense
from locojax.render.projection import Projected, project_gaussians, quat_scale_to_covar, quat_to_rotmat
from locojax.render.rasterize import rasterize, rasterize_batch
from locojax.render.sh import sh_bases, sh_to_color

__all__ = [
    "rasterize", "rasterize_batch", "rasterize_dense", "project_gaussians", "bin_gaussians",
    "composite_tiles", "composite_dense", "Projected", "TileBins", "quat_scale_to_covar",
    "quat_to_rotmat", "sh_bases", "sh_to_color",
]
