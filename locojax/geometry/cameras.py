"""Camera conversions: extrinsics, intrinsics, rays.

Conventions (see `locojax.types`): OpenCV camera axes (x right, y down, z forward), `c2w` is
camera-to-world, `w2c` (= `Camera.viewmat`) its inverse. Normalized intrinsics divide the first row
by the image width and the second by the height; pixel centres sit at (u + 0.5, v + 0.5), as in
gsplat and pixelSplat.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.types import Camera, Views

# float32 products at full precision on every platform (XLA's default is TF32 on recent GPUs and
# bfloat16 passes on TPUs): camera poses feed the rasterizer, whose gsplat parity is 1e-4.
HIGHEST = jax.lax.Precision.HIGHEST


def w2c_to_c2w(w2c):
    """[..., 4, 4] world-to-camera -> camera-to-world, using the rigid-motion inverse
    (R^T, -R^T t): exact for rigid matrices and cheaper and better conditioned than `inv`."""
    rot = w2c[..., :3, :3]
    trans = w2c[..., :3, 3:]
    rot_t = jnp.swapaxes(rot, -1, -2)
    top = jnp.concatenate([rot_t, -jnp.matmul(rot_t, trans, precision=HIGHEST)], axis=-1)
    bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], w2c.dtype), top.shape[:-2] + (1, 4))
    return jnp.concatenate([top, bottom], axis=-2)


def c2w_to_w2c(c2w):
    """[..., 4, 4] camera-to-world -> world-to-camera (rigid inverse; see `w2c_to_c2w`)."""
    return w2c_to_c2w(c2w)


def camera_centers(c2w):
    """[..., 4, 4] camera-to-world -> [..., 3] camera centres in world coordinates."""
    return c2w[..., :3, 3]


def normalize_intrinsics(K, width: int, height: int):
    """[..., 3, 3] pixel intrinsics -> normalized (row 0 / width, row 1 / height)."""
    scale = jnp.array([1.0 / width, 1.0 / height, 1.0], K.dtype)[:, None]
    return K * scale


def denormalize_intrinsics(K_norm, width: int, height: int):
    """[..., 3, 3] normalized intrinsics -> pixels (row 0 * width, row 1 * height)."""
    scale = jnp.array([float(width), float(height), 1.0], K_norm.dtype)[:, None]
    return K_norm * scale


def cameras_from_views(views: Views) -> Camera:
    """The rasterizer's `Camera` (pixel K, w2c) for every view in `views` (leading axes kept)."""
    height, width = views.image_shape
    return Camera(viewmat=c2w_to_w2c(views.c2w), K=denormalize_intrinsics(views.intrinsics, width, height))


def pixel_rays(c2w, K_norm, height: int, width: int):
    """World-space rays through pixel centres.

    Args:
      c2w:    [..., 4, 4] camera-to-world.
      K_norm: [..., 3, 3] normalized intrinsics.
    Returns:
      origins [..., H, W, 3] and unit directions [..., H, W, 3].
    """
    u = (jnp.arange(width, dtype=c2w.dtype) + 0.5) / width
    v = (jnp.arange(height, dtype=c2w.dtype) + 0.5) / height
    uu, vv = jnp.meshgrid(u, v, indexing="xy")  # [H, W]
    pix = jnp.stack([uu, vv, jnp.ones_like(uu)], axis=-1)  # [H, W, 3] normalized image coords
    K_inv = jnp.linalg.inv(K_norm)
    dirs_cam = jnp.einsum("...ij,hwj->...hwi", K_inv, pix, precision=HIGHEST)
    dirs = jnp.einsum("...ij,...hwj->...hwi", c2w[..., :3, :3], dirs_cam, precision=HIGHEST)
    dirs = dirs / jnp.linalg.norm(dirs, axis=-1, keepdims=True)
    origins = jnp.broadcast_to(c2w[..., None, None, :3, 3], dirs.shape)
    return origins, dirs


def plucker_rays(c2w, K_norm, height: int, width: int):
    """Plücker coordinates (d, o x d) of every pixel ray: [..., H, W, 6]."""
    origins, dirs = pixel_rays(c2w, K_norm, height, width)
    moment = jnp.cross(origins, dirs)
    return jnp.concatenate([dirs, moment], axis=-1)
