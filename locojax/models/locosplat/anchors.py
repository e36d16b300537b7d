"""Anchors (paper sec. 2.2, eq. 1): unproject every pixel along its z-depth, voxelise at v, and take
each occupied voxel's mean position and mean feature, in B * V * H * W static rows per batch.

    points = unproject(depth [B, V, H, W], intrinsics [B, V, 3, 3] normalised, c2w [B, V, 4, 4])
    anchors = build_anchors(points [B, N, 3], features [B, N, C], voxel_size)

Pixel centres ((u + 0.5) / W, (v + 0.5) / H) and OpenCV c2w, x = R D K^-1 [p; 1] + t, as VolSplat's
`project_features_to_me` (sample_image_grid + get_world_rays with z-plane directions).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from locojax.models.locosplat.voxels import Grouping, group_by_voxel, segment_mean, voxel_keys


def unproject(depth, intrinsics, c2w):
    """depth [B, V, H, W] z-depth, intrinsics [B, V, 3, 3] normalised by W / H, c2w [B, V, 4, 4] ->
    world points [B, V, H, W, 3] (float32)."""
    h, w = depth.shape[-2:]
    f32 = jnp.float32
    u = (jnp.arange(w, dtype=f32) + 0.5) / w
    v = (jnp.arange(h, dtype=f32) + 0.5) / h
    pix = jnp.stack(jnp.broadcast_arrays(u[None, :], v[:, None], jnp.ones((h, w), f32)), -1)  # [H, W, 3]
    k_inv = jnp.linalg.inv(intrinsics.astype(f32))
    rays = jnp.einsum("bvij,hwj->bvhwi", k_inv, pix)  # camera-space, z = 1
    cam = rays * depth.astype(f32)[..., None]
    rot, t = c2w[..., :3, :3].astype(f32), c2w[..., :3, 3].astype(f32)
    return jnp.einsum("bvij,bvhwj->bvhwi", rot, cam) + t[:, :, None, None, :]


@flax.struct.dataclass
class Anchors:
    """Per-scene voxel anchors in N static rows (live rows first, in key order).

    positions [B, N, 3] mean point of each voxel; features [B, N, C] mean feature; count [B, N]
    points per voxel (0 = dead row); live [B, N] bool; num_anchors [B] int32; key_overflow [B] int32
    (points whose voxel key left the int32-safe range: clamped into one sentinel voxel, see voxels.py);
    segment [B, N] the anchor row of each point.
    """

    positions: jax.Array
    features: jax.Array
    count: jax.Array
    live: jax.Array
    num_anchors: jax.Array
    key_overflow: jax.Array
    segment: jax.Array


def build_anchors(points, features, voxel_size: float) -> Anchors:
    """points [B, N, 3], features [B, N, C] -> Anchors (means are differentiable in both inputs:
    depth learns through the anchor positions, as in VolSplat's scatter-add mean)."""

    def one(x, f):
        keys, overflow = voxel_keys(x, voxel_size)
        g: Grouping = group_by_voxel(keys)
        return (segment_mean(x, g), segment_mean(f, g), g.count, g.num_rows, overflow, g.segment)

    pos, feat, count, num, overflow, segment = jax.vmap(one)(points, features)
    return Anchors(positions=pos, features=feat, count=count, live=count > 0, num_anchors=num,
                   key_overflow=overflow, segment=segment)
