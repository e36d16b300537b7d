"""Visibility regularisation of TokenGS and LocusGS (the LocusGS paper, eqs. 27-28).

A 3D point x is projected into every supervision view t; with (u~, v~) its projected coordinates
normalised so the image spans [-1, 1] (u~ = 2 u / W - 1 for pixel u, gsplat's pixel convention),
  phi_t(x) = ReLU(|u~| - 1) + ReLU(|v~| - 1)                           (eq. 27)
  L_vis(X) = 1/|X| sum_x min_t phi_t(x)                                  (eq. 28)
so a point inside at least one view's image costs nothing and one outside all of them is pulled
towards the nearest image border. LocusGS applies it to the decoded Gaussian centres and to the
anchor centres of every supervised decoder layer (eq. 29); those weights and the layer weights
(eq. 30) are the family's (`locojax.models.locusgs.config.LossConfig`).

Choices where the paper is silent, taken from TokenGS's released loss:
  * the per-point penalty is clamped at `max_penalty` = 1.0 (TokenGS `visibility_distance_threshold`)
    after the min over views, so far-off points stop pulling (zero gradient);
  * a point behind or on a view's near plane (z <= near) gets that view's maximal penalty
    `max_penalty` with zero gradient instead of a sign-flipped perspective projection (TokenGS took
    means2d from gsplat, which zeroes them for culled points; a fixed maximum is the well-defined
    version of "not visible in that view"). near defaults to locojax.render's near plane, 0.01;
  * non-finite points are treated as invisible everywhere (max penalty, no NaN gradients).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from locojax.geometry.cameras import c2w_to_w2c


@functools.partial(jax.jit, static_argnames=("near", "max_penalty"))
def out_of_view_penalty(points, c2w, intrinsics, *, near: float = 0.01, max_penalty: float = 1.0):
    """phi of eq. 27 for every point and view.

    Args:
      points: [..., N, 3] world coordinates.
      c2w: [..., V, 4, 4] camera-to-world (OpenCV) of the supervision views.
      intrinsics: [..., V, 3, 3] normalized intrinsics (fx / W, cx / W; fy / H, cy / H), as in Views.
    Returns:
      [..., V, N] penalties >= 0 (points behind a view: `max_penalty`).
    """
    finite = jnp.all(jnp.isfinite(points), axis=-1)  # [..., N]
    points = jnp.where(finite[..., None], points, 0.0)  # sanitize first: no NaN in any branch's gradient
    w2c = c2w_to_w2c(c2w)
    cam = jnp.einsum("...vij,...nj->...vni", w2c[..., :3, :3], points) + w2c[..., None, :3, 3]  # [..., V, N, 3]
    z = cam[..., 2]
    in_front = (z > near) & finite[..., None, :]
    z_safe = jnp.where(in_front, z, 1.0)
    x_n = cam[..., 0] / z_safe
    y_n = cam[..., 1] / z_safe
    fx, fy = intrinsics[..., 0, 0, None], intrinsics[..., 1, 1, None]
    cx, cy = intrinsics[..., 0, 2, None], intrinsics[..., 1, 2, None]
    skew = intrinsics[..., 0, 1, None]
    u_tilde = 2.0 * (fx * x_n + skew * y_n + cx) - 1.0  # [-1, 1] across the image width
    v_tilde = 2.0 * (fy * y_n + cy) - 1.0
    phi = jax.nn.relu(jnp.abs(u_tilde) - 1.0) + jax.nn.relu(jnp.abs(v_tilde) - 1.0)
    return jnp.where(in_front, phi, max_penalty)


@functools.partial(jax.jit, static_argnames=("near", "max_penalty"))
def visibility_loss(points, c2w, intrinsics, *, near: float = 0.01, max_penalty: float = 1.0):
    """L_vis of eq. 28 (clamped as TokenGS): [..., N, 3] points, [..., V] views -> [...].

    See `out_of_view_penalty` for the camera arguments. `max_penalty` must be positive.
    """
    if max_penalty <= 0:
        raise ValueError(f"visibility_loss: max_penalty must be > 0, got {max_penalty}")
    if points.shape[-1] != 3 or c2w.shape[-2:] != (4, 4) or intrinsics.shape[-2:] != (3, 3):
        raise ValueError(
            f"visibility_loss: expected points [..., N, 3], c2w [..., V, 4, 4], intrinsics [..., V, 3, 3]; "
            f"got {points.shape}, {c2w.shape}, {intrinsics.shape}"
        )
    phi = out_of_view_penalty(points, c2w, intrinsics, near=near, max_penalty=max_penalty)
    per_point = jnp.minimum(jnp.min(phi, axis=-2), max_penalty)  # min over supervision views, then clamp
    return jnp.mean(per_point, axis=-1)


def kept_visibility_loss(gaussians, c2w, intrinsics, *, width: int, height: int, near: float, far: float,
                         eps2d: float = 0.3, max_penalty: float = 1.0):
    """TokenGS's released L_vis (the code, not eq. 28): phi of the rasteriser's 2D means, where a
    Gaussian the rasteriser culls (outside near/far, footprint missing the image, alpha < 1/255) has
    means2d = 0 in gsplat, i.e. u~ = v~ = -1 and no penalty. Only Gaussians whose footprint still
    touches the image while their centre is outside it are pulled in; far-off ones are not.

    gaussians: Gaussians [B, N]; c2w [B, V, 4, 4]; intrinsics [B, V, 3, 3] normalized -> [B].
    """
    from locojax.geometry.cameras import denormalize_intrinsics
    from locojax.types import Camera
    from locojax.render.projection import project_gaussians

    cams = Camera(viewmat=c2w_to_w2c(c2w), K=denormalize_intrinsics(intrinsics, width, height))

    def one(g, cam):
        p = project_gaussians(g, cam, width=width, height=height, sh_degree=0, near=near, far=far, eps2d=eps2d)
        kept = jnp.all(p.radii > 0, axis=-1)
        u = 2.0 * p.means2d[:, 0] / width - 1.0
        v = 2.0 * p.means2d[:, 1] / height - 1.0
        phi = jax.nn.relu(jnp.abs(u) - 1.0) + jax.nn.relu(jnp.abs(v) - 1.0)
        return jnp.where(kept, phi, 0.0)

    phi = jax.vmap(lambda g, cb: jax.vmap(lambda c: one(g, c))(cb))(gaussians, cams)  # [B, V, N]
    per_point = jnp.minimum(jnp.min(phi, axis=1), max_penalty)
    return jnp.mean(per_point, axis=-1)
