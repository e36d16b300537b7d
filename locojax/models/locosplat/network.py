"""LoCoSplatNet: depth branch -> per-pixel features -> anchors -> 3D stage -> head -> Gaussians.

    out = LoCoSplatNet(cfg).apply({"params": p}, images, intrinsics, c2w, near, far,
                                  train=..., coarse=...)

Per pixel (sec. 2.1, VolSplat encoder_volsplat.py): the Gaussian regressor conv3x3 -> GELU -> conv3x3
(64) on [RGB 3; depth 1; peak matching probability 1; DPT features 64], and
f = [regressor 64; RGB 3; DPT 64; peak 1] = 132. Each depth map (final D, and with `coarse` the
coarse D~: scale-0 inverse depth bilinearly upsampled x4, align_corners, as DepthSplat's
intermediate prediction) is unprojected, voxelised and decoded through the SAME 3D stage and head
(eq. 6: shared weights; the per-pixel f is the same, only positions and grouping change).
The depth branch computes its image side in `depth.image_dtype`; everything here is float32.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from locojax.models.common.layers import TorchConv, gelu
from locojax.models.locosplat.anchors import Anchors, build_anchors, unproject
from locojax.models.locosplat.config import ModelConfig
from locojax.models.locosplat.decode import decode_gaussians
from locojax.models.locosplat.depth import DepthBranch
from locojax.models.locosplat.depth.resize import resize_hw
from locojax.models.locosplat.stage3d import LocalContext, PointwiseHead
from locojax.types import Gaussians

FINAL_SET, COARSE_SET = "final", "coarse"


@flax.struct.dataclass
class GaussianSet:
    """One decoded set: gaussians [B, N, ...], anchors (rows [B, N]), offsets [B, N, 3] (mu - x_a),
    grid_overflow [B] int32 (coarse-grid keys out of range)."""

    gaussians: Gaussians
    anchors: Anchors
    offsets: jax.Array
    grid_overflow: jax.Array


@flax.struct.dataclass
class NetOutput:
    sets: Any  # name -> GaussianSet ("final", and "coarse" when asked)
    depth: Any  # DepthBranchOutput


def upsample_coarse_depth(coarse_depth, size):
    """[B, V, h, w] scale-0 z-depth -> [B, V, H, W]: its inverse bilinearly resized (align_corners),
    then inverted (DepthSplat mv_unimatch: intermediate inverse depths are upsampled for supervision)."""
    b, v, h, w = coarse_depth.shape
    inv = (1.0 / coarse_depth.astype(jnp.float32)).reshape(b * v, h, w, 1)
    up = resize_hw(inv, size, "bilinear", True)
    return (1.0 / up[..., 0]).reshape(b, v, *size)


class _PositionalDepthBranch(DepthBranch):
    """DepthBranch with `train` positional, so that nn.remat can mark it static (same param names)."""

    def __call__(self, images, intrinsics, c2w, near, far, train):
        return super().__call__(images, intrinsics, c2w, near, far, train=train)


class LoCoSplatNet(nn.Module):
    cfg: ModelConfig

    @nn.compact
    def __call__(self, images, intrinsics, c2w, near, far, *, train: bool, coarse: bool = False) -> NetOutput:
        cfg = self.cfg
        b, v, h, w, _ = images.shape
        f32 = jnp.float32
        if cfg.remat:  # recompute the depth branch's activations in the backward pass (12/24 views)
            d = nn.remat(_PositionalDepthBranch, static_argnums=(6,))(cfg.depth, name="depth")(
                images, intrinsics, c2w, near, far, train)
        else:
            d = DepthBranch(cfg.depth, name="depth")(images, intrinsics, c2w, near, far, train=train)
        img = images.astype(f32)
        x = jnp.concatenate([img, d.depth[..., None], d.peak_prob, d.dpt_features], axis=-1)
        r = TorchConv(cfg.regressor_channels, 3, padding=1, name="gaussian_regressor_0")(x)
        r = TorchConv(cfg.regressor_channels, 3, padding=1, name="gaussian_regressor_2")(gelu(r))
        feats = jnp.concatenate([r, img, d.dpt_features, d.peak_prob], axis=-1)  # [B, V, H, W, 132]
        n = v * h * w
        feats = feats.reshape(b, n, -1)
        rgb_slice = slice(cfg.regressor_channels, cfg.regressor_channels + 3)

        context = LocalContext(tuple(cfg.grid_cell_sizes), cfg.proj_dim, cfg.fusion_hidden, cfg.fusion,
                               cfg.activation, cfg.fine_level_interp, name="local_context")
        head = PointwiseHead(cfg.head_hidden, cfg.raw_dim, cfg.activation, name="head")
        depths = {FINAL_SET: d.depth}
        if coarse:
            depths[COARSE_SET] = upsample_coarse_depth(d.coarse_depth, (h, w))
        sets = {}
        for name, depth in depths.items():
            points = unproject(depth, intrinsics, c2w).reshape(b, n, 3)
            anchors = build_anchors(points, feats, cfg.voxel_size)
            f_prime, grid_overflow = context(anchors, points, feats)
            raw = head(f_prime)
            gaussians, offsets = decode_gaussians(
                raw, anchors.positions, anchors.features[..., rgb_slice], anchors.live,
                voxel_size=cfg.voxel_size, sh_degree=cfg.sh_degree, scale_min=cfg.scale_min,
                scale_max=cfg.scale_max, offset_voxels=cfg.offset_voxels)
            sets[name] = GaussianSet(gaussians, anchors, offsets, grid_overflow)
        return NetOutput(sets=sets, depth=d)
