"""O(pixels x N) pure-jnp reference rasterizer with gsplat 1.5.3 semantics (for tests; tiny scenes).

Every pixel composites every projected Gaussian in depth order exactly as gsplat's
`RasterizeToPixels3DGSFwd.cu` does for the Gaussians of its tile:
  alpha = min(0.999, opacity * exp(-sigma)), skipped when sigma < 0 or alpha < 1/255;
  front to back, stopping (the current Gaussian excluded) as soon as T * (1 - alpha) <= 1e-4;
  rgb = sum_i alpha_i T_i c_i + T_final * background; alpha = 1 - T_final;
  depth ("ED") = sum_i alpha_i T_i z_i / max(alpha, 1e-10).
Culled Gaussians (radius 0 in `project_gaussians`) are left out, as gsplat's tile lists leave them
out. Transmittance is a running product (not log space), independent of the tiled fast path.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.render.projection import ALPHA_THRESHOLD, project_gaussians
from locojax.render.validate import check_inputs
from locojax.types import RenderOutput

TRANSMITTANCE_STOP = 1e-4


def composite_dense(means2d, conics, opacities, colors, depths, visible, *, width: int, height: int):
    """Composite every Gaussian into every pixel.

    Args: means2d [N, 2], conics [N, 3], opacities [N], colors [N, 3], depths [N], visible [N] bool.
    Returns: rgb [H, W, 3] (no background), accumulated z [H, W], final transmittance [H, W].
    """
    order = jnp.argsort(jnp.where(visible, depths, jnp.inf), stable=True)
    m, c, o, col, z, vis = (a[order] for a in (means2d, conics, opacities, colors, depths, visible))
    ys, xs = jnp.meshgrid(jnp.arange(height) + 0.5, jnp.arange(width) + 0.5, indexing="ij")
    dx = m[:, 0][None, None, :] - xs[..., None]  # [H, W, N]
    dy = m[:, 1][None, None, :] - ys[..., None]
    sigma = 0.5 * (c[:, 0] * dx * dx + c[:, 2] * dy * dy) + c[:, 1] * dx * dy
    alpha = jnp.minimum(0.999, o * jnp.exp(-sigma))
    valid = vis & (sigma >= 0.0) & (alpha >= ALPHA_THRESHOLD)
    one_minus = jnp.where(valid, 1.0 - alpha, 1.0)
    # T before each Gaussian, counting every valid predecessor; by monotonicity of T, "stopped
    # before i" is exactly "T_before_i * (1 - alpha_i) <= 1e-4".
    t_incl = jnp.cumprod(one_minus, axis=-1)
    t_before = t_incl / one_minus
    used = valid & (t_incl > TRANSMITTANCE_STOP)
    w = jnp.where(used, alpha * t_before, 0.0)
    rgb = jnp.einsum("hwn,nc->hwc", w, col, precision=jax.lax.Precision.HIGHEST)  # float32 on GPUs/TPUs too
    zacc = jnp.einsum("hwn,n->hw", w, z, precision=jax.lax.Precision.HIGHEST)
    t_final = jnp.prod(jnp.where(used, one_minus, 1.0), axis=-1)
    return rgb, zacc, t_final


def finish_output(rgb, zacc, t_final, background, overflow, num_invalid) -> RenderOutput:
    """Background, alpha and gsplat's "ED" depth from the composited sums ([H, W, ...])."""
    alpha = 1.0 - t_final[..., None]
    if background is not None:
        rgb = rgb + t_final[..., None] * background
    depth = zacc[..., None] / jnp.maximum(alpha, 1e-10)
    return RenderOutput(rgb=rgb, depth=depth, alpha=alpha,
                        overflow=jnp.asarray(overflow, jnp.int32),
                        num_invalid=jnp.asarray(num_invalid, jnp.int32))


def rasterize_dense(gaussians, camera, *, width: int, height: int, sh_degree: int, background=None,
                    near: float = 0.01, far: float = 1e10, eps2d: float = 0.3) -> RenderOutput:
    """Reference render of one camera (signature of `locojax.render.rasterize`); overflow is 0."""
    check_inputs(gaussians, camera, sh_degree=sh_degree, background=background, batch_dims=0)
    p = project_gaussians(gaussians, camera, width=width, height=height, sh_degree=sh_degree,
                          near=near, far=far, eps2d=eps2d)
    visible = jnp.all(p.radii > 0, axis=-1)
    rgb, zacc, t_final = composite_dense(p.means2d, p.conics, p.opacities, p.colors, p.depths, visible,
                                         width=width, height=height)
    return finish_output(rgb, zacc, t_final, background, 0, p.num_invalid)
