"""Plücker rays through pixel centres, in the layouts the families' official codes use.

    rays = plucker_rays(c2w, K_norm, H, W, layout="moment_first")   # [..., H, W, 6] = (o x d, d)
    pooled = patch_pooled_rays(rays, patch)                          # [..., H/p, W/p, 6]

Pixel centres sit at (u + 0.5, v + 0.5) and directions are unit length (`pixel_rays`). GlobalSplat
and TokenGS/LocusGS feed (o x d, d) ("moment_first"); `locojax.geometry.cameras.plucker_rays`
keeps the (d, o x d) order ("direction_first").
"""

from __future__ import annotations

import jax.numpy as jnp

from locojax.geometry.cameras import pixel_rays

LAYOUTS = ("moment_first", "direction_first")


def plucker_rays(c2w, K_norm, height: int, width: int, layout: str = "moment_first"):
    """[..., 4, 4] c2w, [..., 3, 3] normalised K -> [..., H, W, 6] Plücker rays (float32)."""
    if layout not in LAYOUTS:
        raise ValueError(f"plucker layout {layout!r}: expected one of {LAYOUTS}")
    origins, dirs = pixel_rays(c2w.astype(jnp.float32), K_norm.astype(jnp.float32), height, width)
    moment = jnp.cross(origins, dirs)
    parts = [moment, dirs] if layout == "moment_first" else [dirs, moment]
    return jnp.concatenate(parts, axis=-1)


def patch_pooled_rays(rays, patch: int):
    """[..., H, W, C] -> [..., H/p, W/p, C]: the mean over each p x p patch (torch avg_pool2d)."""
    *lead, h, w, c = rays.shape
    if h % patch or w % patch:
        raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {patch}")
    x = rays.reshape(*lead, h // patch, patch, w // patch, patch, c)
    return x.mean(axis=(-4, -2))


def point_to_ray_distance(points, rays, eps: float = 1e-8):
    """Distances from points to lines given in Plücker form (moment m = o x d, direction d).

    Args:
      points: [..., P, 3]; rays: [..., R, 6] laid out (m, d), any |d| > 0 (normalised here: d/|d|,
        m/|d|, so pooled rays work).
    Returns:
      [..., P, R] distances |x x d - m| for the normalised line.
    """
    m, d = rays[..., :3], rays[..., 3:]
    norm = jnp.maximum(jnp.linalg.norm(d, axis=-1, keepdims=True), eps)
    d, m = d / norm, m / norm
    cross = jnp.cross(points[..., :, None, :], d[..., None, :, :])  # [..., P, R, 3]
    return jnp.linalg.norm(cross - m[..., None, :, :], axis=-1)
