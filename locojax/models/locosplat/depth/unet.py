"""The depth regressor's UNet (DepthSplat `unimatch/ldm_unet/unet.py` UNetModel, as MultiViewUniMatch
builds it: prenorm res blocks, conv resampling, GroupNorm(8) (4 when C % 8 != 0), SiLU, attention
with 32-channel heads at the listed downsampling rates, attending across all views jointly
(`use_cross_view_self_attn`), zero-initialised last convs) plus the regressor around it
(paper sec. 2.1): [conv 3x3, GroupNorm(8), GELU, UNet, conv 3x3] + 1x1 residual, then the depth head
conv 3x3 (C -> 2C, replicate) GELU conv 3x3 (2C -> D, replicate) -> softmax over candidates.

`separable` (LoCoSplat's "depthwise-separable" regressor, sec. 2.1/B.1; which convs, the paper does
not say: see `config.DW_SEPARABLE_CHOICES`): "unet" replaces every 3x3 conv of the UNet by a 3x3
depthwise conv followed by a 1x1 pointwise conv; "regressor" also the regressor's input and output
3x3 convs; "none" keeps all dense.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.layers import TorchConv, gelu

ZEROS = nn.initializers.zeros


def group_norm(channels: int, name: str):
    """ldm `normalization(ch)`: GroupNorm(8) or GroupNorm(4) if ch % 8 != 0; eps 1e-5, affine."""
    return nn.GroupNorm(num_groups=8 if channels % 8 == 0 else 4, epsilon=1e-5, name=name)


def conv3x3(features: int, name: str, *, stride: int = 1, separable: bool = False, zero_init: bool = False,
            padding_mode: str = "zeros"):
    """3x3 conv (padding 1) named `name`, or its depthwise-separable replacement (`name`_dw 3x3
    depthwise, `name`_pw 1x1). Call inside a compact method (the convs belong to the caller)."""
    init = dict(kernel_init=ZEROS, bias_init=ZEROS) if zero_init else {}
    if not separable:
        return TorchConv(features, 3, stride, 1, padding_mode=padding_mode, name=name, **init)

    def apply(x):
        c = x.shape[-1]
        x = TorchConv(c, 3, stride, 1, padding_mode=padding_mode, groups=c, name=f"{name}_dw")(x)
        return TorchConv(features, 1, name=f"{name}_pw", **init)(x)

    return apply


class Resample(nn.Module):
    """ldm Downsample (conv 3x3 stride 2, child `op`) or Upsample (nearest x2 then conv 3x3, `conv`)."""

    up: bool
    separable: bool = False

    @nn.compact
    def __call__(self, x):
        c = x.shape[-1]
        if self.up:
            x = jnp.repeat(jnp.repeat(x, 2, axis=-3), 2, axis=-2)
            return conv3x3(c, "conv", separable=self.separable)(x)
        return conv3x3(c, "op", stride=2, separable=self.separable)(x)


class ResBlock(nn.Module):
    out_ch: int
    separable: bool = False

    @nn.compact
    def __call__(self, x):
        h = conv3x3(self.out_ch, "in_layers_2", separable=self.separable)(
            nn.silu(group_norm(x.shape[-1], "in_layers_0")(x)))
        h = conv3x3(self.out_ch, "out_layers_3", separable=self.separable, zero_init=True)(
            nn.silu(group_norm(self.out_ch, "out_layers_0")(h)))
        if x.shape[-1] != self.out_ch:
            x = TorchConv(self.out_ch, 1, name="skip_connection")(x)
        return x + h


class CrossViewAttention(nn.Module):
    """ldm AttentionBlock + QKVAttentionLegacy over the tokens of all V views of a scene.
    x [B*V, h, w, C] -> same."""

    num_views: int
    head_channels: int = 32

    @nn.compact
    def __call__(self, x):
        n, h, w, c = x.shape
        hc = min(self.head_channels, c)  # tiny widths (< 32 channels): one head (the official asserts c % 32 == 0)
        heads = c // hc
        b = n // self.num_views
        xn = group_norm(c, "norm")(x)
        qkv = TorchConv(3 * c, 1, name="qkv")(xn)  # legacy layout: channels (head, [q|k|v], ch)
        qkv = qkv.reshape(b, self.num_views * h * w, heads, 3, hc)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]
        scale = hc ** -0.25
        logits = jnp.einsum("bthc,bshc->bhts", q * scale, k * scale)
        att = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(v.dtype)
        out = jnp.einsum("bhts,bshc->bthc", att, v).reshape(n, h, w, c)
        return x + TorchConv(c, 1, kernel_init=ZEROS, bias_init=ZEROS, name="proj_out")(out)


class UNet(nn.Module):
    """x [B*V, h, w, C] -> [B*V, h, w, C]; h, w divisible by 2**(len(channel_mult) - 1)."""

    channels: int
    channel_mult: Sequence[int]
    attn_resolutions: Sequence[int]
    num_views: int
    num_res_blocks: int = 1
    head_channels: int = 32
    separable: bool = False

    @nn.compact
    def __call__(self, x):
        mc, sep = self.channels, self.separable
        h = conv3x3(mc, "input_blocks_0_0", separable=sep)(x)
        hs, chans = [h], [mc]
        ds, blk = 1, 1
        for level, mult in enumerate(self.channel_mult):
            for _ in range(self.num_res_blocks):
                h = ResBlock(mult * mc, sep, name=f"input_blocks_{blk}_0")(h)
                if ds in self.attn_resolutions:
                    h = CrossViewAttention(self.num_views, self.head_channels, name=f"input_blocks_{blk}_1")(h)
                hs.append(h)
                chans.append(mult * mc)
                blk += 1
            if level != len(self.channel_mult) - 1:
                h = Resample(False, sep, name=f"input_blocks_{blk}_0")(h)
                hs.append(h)
                chans.append(h.shape[-1])
                ds *= 2
                blk += 1
        h = ResBlock(h.shape[-1], sep, name="middle_block_0")(h)
        h = ResBlock(h.shape[-1], sep, name="middle_block_2")(h)
        blk = 0
        for level, mult in list(enumerate(self.channel_mult))[::-1]:
            for i in range(self.num_res_blocks + 1):
                h = jnp.concatenate([h, hs.pop()], axis=-1)
                h = ResBlock(mc * mult, sep, name=f"output_blocks_{blk}_0")(h)
                j = 1
                if ds in self.attn_resolutions:
                    h = CrossViewAttention(self.num_views, self.head_channels, name=f"output_blocks_{blk}_1")(h)
                    j = 2
                if level and i == self.num_res_blocks:
                    h = Resample(True, sep, name=f"output_blocks_{blk}_{j}")(h)
                    ds //= 2
                blk += 1
        h = nn.silu(group_norm(h.shape[-1], "out_0")(h))
        return conv3x3(mc, "out_2", separable=sep, zero_init=True)(h)


class Regressor(nn.Module):
    """concat [B*V, h, w, C_in] -> matching probabilities [B*V, h, w, D] (softmax over candidates)."""

    channels: int
    candidates: int
    channel_mult: Sequence[int]
    attn_resolutions: Sequence[int]
    num_views: int
    num_res_blocks: int = 1
    head_channels: int = 32
    separable: str = "none"

    @nn.compact
    def __call__(self, x):
        c = self.channels
        sep_unet = self.separable in ("unet", "regressor")
        sep = self.separable == "regressor"
        h = conv3x3(c, "regressor_0", separable=sep)(x)
        h = gelu(nn.GroupNorm(num_groups=8, epsilon=1e-5, name="regressor_1")(h))
        h = UNet(c, self.channel_mult, self.attn_resolutions, self.num_views, self.num_res_blocks,
                 self.head_channels, sep_unet, name="regressor_3")(h)
        h = conv3x3(c, "regressor_4", separable=sep)(h)
        h = h + TorchConv(c, 1, name="regressor_residual")(x)
        h = gelu(TorchConv(2 * c, 3, 1, 1, padding_mode="replicate", name="depth_head_0")(h))
        logits = TorchConv(self.candidates, 3, 1, 1, padding_mode="replicate", name="depth_head_2")(h)
        return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
