"""DINOv2 ViT trunk (DepthAnythingV2's `pretrained`), returning the tapped layers' patch tokens.

Matches `DinoVisionTransformer.get_intermediate_layers(x, taps, return_class_token=...)` of the
official code: patch-14 conv embedding, class token, position embedding resized bicubically from
its 37 x 37 grid with DINOv2's +0.1 offset, pre-norm blocks with LayerScale, LayerNorm eps 1e-6
(DINOv2's, not torch's default), the final norm applied to every tap.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import flax.linen as nn
import jax.numpy as jnp

from locojax.models.common.layers import TorchConv, TorchDense, gelu
from locojax.models.common.attention import multihead_attention
from locojax.models.common.scan_blocks import scan_blocks, tap_stride
from locojax.models.locosplat.depth.resize import resize_hw

DINOV2_LN_EPS = 1e-6
PATCH = 14
POS_GRID = 37  # DINOv2 img_size 518 / 14
INTERPOLATE_OFFSET = 0.1


def _ln(name):
    return nn.LayerNorm(epsilon=DINOV2_LN_EPS, param_dtype=jnp.float32, name=name)


class DinoBlock(nn.Module):
    """x += ls1 * attn(norm1(x)); x += ls2 * mlp(norm2(x)). [N, T, D] -> [N, T, D]."""

    dim: int
    heads: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        h = _ln("norm1")(x).astype(self.dtype)
        qkv = TorchDense(3 * self.dim, dtype=self.dtype, name="attn_qkv")(h)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        h = multihead_attention(q, k, v, self.heads)
        h = TorchDense(self.dim, dtype=self.dtype, name="attn_proj")(h)
        x = x + h * self.param("ls1", nn.initializers.constant(1.0), (self.dim,)).astype(h.dtype)
        h = _ln("norm2")(x).astype(self.dtype)
        h = TorchDense(self.dim * 4, dtype=self.dtype, name="mlp_fc1")(h)
        h = TorchDense(self.dim, dtype=self.dtype, name="mlp_fc2")(gelu(h))
        return x + h * self.param("ls2", nn.initializers.constant(1.0), (self.dim,)).astype(h.dtype)


class DinoV2(nn.Module):
    """x [N, H, W, 3] (ImageNet-normalised, H and W multiples of 14) ->
    (patch tokens [N, H/14 * W/14, D], class tokens [N, D]) for each tap (final norm applied)."""

    dim: int
    heads: int
    depth: int
    taps: Sequence[int]
    dtype: jnp.dtype = jnp.float32
    scan_layers: bool = False  # True: the blocks as one jax.lax.scan (same params; see docs/performance.md)

    @nn.compact
    def __call__(self, x):
        n, hh, ww, _ = x.shape
        gh, gw = hh // PATCH, ww // PATCH
        tok = TorchConv(self.dim, PATCH, PATCH, dtype=self.dtype, name="patch_embed")(x)
        tok = tok.reshape(n, gh * gw, self.dim)
        cls = self.param("cls_token", nn.initializers.normal(1e-6), (1, 1, self.dim))
        pos = self.param("pos_embed", nn.initializers.normal(0.02), (1, 1 + POS_GRID * POS_GRID, self.dim))
        tok = jnp.concatenate([jnp.broadcast_to(cls, (n, 1, self.dim)).astype(tok.dtype), tok], axis=1)
        tok = tok + self._pos(pos, gh, gw).astype(tok.dtype)
        every = tap_stride(self.depth, self.taps)
        _, hidden = scan_blocks(self, functools.partial(DinoBlock, self.dim, self.heads, self.dtype),
                                [f"blocks_{i}" for i in range(self.depth)], tok, out_every=every,
                                unroll=not self.scan_layers)
        norm = _ln("norm")
        outs = []
        for i in self.taps:
            y = norm(hidden[(i + 1) // every - 1])
            outs.append((y[:, 1:], y[:, 0]))
        return outs

    def _pos(self, pos, gh: int, gw: int):
        """DINOv2 `interpolate_pos_encoding`: bicubic, scale factor ((g + 0.1) / 37), no antialias."""
        if gh == POS_GRID and gw == POS_GRID:
            return pos
        grid = pos[:, 1:].reshape(1, POS_GRID, POS_GRID, self.dim)
        sf = ((gh + INTERPOLATE_OFFSET) / POS_GRID, (gw + INTERPOLATE_OFFSET) / POS_GRID)
        out_hw = (int(math.floor(POS_GRID * sf[0])), int(math.floor(POS_GRID * sf[1])))
        assert out_hw == (gh, gw), (out_hw, gh, gw)
        grid = resize_hw(grid, out_hw, "bicubic", False, sf)
        return jnp.concatenate([pos[:, :1], grid.reshape(1, gh * gw, self.dim)], axis=1)
