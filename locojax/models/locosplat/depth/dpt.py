"""DepthSplat's DPT head (`unimatch/dpt_head.py` DPTHead, concat_features=True): fuses the four
tapped ViT layers (at 1/8 resolution) with the CNN and multi-view features and upsamples to full
resolution. `return_feature=True`: the per-pixel feature head (f's 64-d DPT part); otherwise the
depth upsampler, whose last conv is zero-initialised (a residual on the bilinear inverse depth).

Layouts follow the official branches for (upsample_factor, num_scales) = (4, 1) (the single-scale
fixture) and (2, 2) (the two-scale model).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.layers import TorchConv, gelu
from locojax.models.locosplat.depth.resize import resize_hw


class ConvTranspose(nn.Module):
    """torch.nn.ConvTranspose2d with kernel_size == stride (non-overlapping), NHWC.
    Kernel stored [k, k, in, out] (torch weight [in, out, k, k] transposed (2, 3, 0, 1))."""

    features: int
    k: int

    @nn.compact
    def __call__(self, x):
        c = x.shape[-1]
        # torch's default init for ConvTranspose2d computes fan_in from weight.size(1) * k * k = out * k * k
        fan = self.features * self.k * self.k
        bound = 1.0 / jnp.sqrt(fan)
        w = self.param("kernel", lambda key, s: jax.random.uniform(key, s, jnp.float32, -bound, bound),
                       (self.k, self.k, c, self.features))
        b = self.param("bias", lambda key, s: jax.random.uniform(key, s, jnp.float32, -bound, bound),
                       (self.features,))
        n, h, wd, _ = x.shape
        y = jnp.einsum("nhwc,abco->nhawbo", x, w.astype(x.dtype)).reshape(n, h * self.k, wd * self.k, self.features)
        return y + b.astype(x.dtype)


class ResidualConvUnit(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        out = TorchConv(self.features, 3, 1, 1, name="conv1")(jax.nn.relu(x))
        out = TorchConv(self.features, 3, 1, 1, name="conv2")(jax.nn.relu(out))
        return out + x


class FusionBlock(nn.Module):
    features: int
    has_unit1: bool = True

    @nn.compact
    def __call__(self, x, skip=None, size=None):
        if skip is not None:
            x = x + ResidualConvUnit(self.features, name="resConfUnit1")(skip)
        x = ResidualConvUnit(self.features, name="resConfUnit2")(x)
        size = size or (x.shape[-3] * 2, x.shape[-2] * 2)
        x = resize_hw(x, size, "bilinear", True)
        return TorchConv(self.features, 1, name="out_conv")(x)


class DPTHead(nn.Module):
    """taps: 4 x [N, H/8, W/8, C_vit]; cnn: [1/2 64, 1/2 96, 1/4 128] (high to low);
    mv: [N, H/4, W/4, 128] (num_scales 1) or [1/2 64, 1/4 128] (num_scales 2); depth: inverse depth
    at the last scale's resolution (depth upsampler only). -> [N, H, W, features] (return_feature) or
    [N, H, W, 1] residual inverse depth."""

    features: int
    out_channels: Sequence[int]
    upsample_factor: int
    num_scales: int
    return_feature: bool

    @nn.compact
    def __call__(self, taps, cnn, mv, depth=None):
        oc = self.out_channels
        layers = []
        for i, x in enumerate(taps):
            x = TorchConv(oc[i], 1, name=f"projects_{i}")(x)
            if i == 0:
                x = ConvTranspose(oc[0], 4, name="resize_layers_0")(x)
            elif i == 1:
                x = ConvTranspose(oc[1], 2, name="resize_layers_1")(x)
            elif i == 3:
                x = TorchConv(oc[3], 3, 2, 1, name="resize_layers_3")(x)
            layers.append(x)
        l1, l2, l3, l4 = layers
        extra = [] if self.return_feature else [depth]
        key = (self.upsample_factor, self.num_scales)
        if key == (4, 1):
            c1 = [cnn[0], cnn[1], l1]
            c2 = [cnn[2], l2, mv] + extra
            c3 = [l3]
        elif key == (2, 2):
            c1 = [cnn[0], cnn[1], mv[0]] + extra + [l1]
            c2 = [cnn[2], l2, mv[1]]
            c3 = [l3]
        else:
            raise ValueError(f"DPT head: (upsample_factor, num_scales)={key} not supported (use (4, 1) or (2, 2))")
        l1 = TorchConv(oc[0], 1, name="concat_projects_0")(jnp.concatenate(c1, -1))
        l2 = TorchConv(oc[1], 1, name="concat_projects_1")(jnp.concatenate(c2, -1))
        l3 = TorchConv(oc[2], 1, name="concat_projects_2")(jnp.concatenate(c3, -1))
        f = self.features
        r1 = TorchConv(f, 3, 1, 1, use_bias=False, name="layer1_rn")(l1)
        r2 = TorchConv(f, 3, 1, 1, use_bias=False, name="layer2_rn")(l2)
        r3 = TorchConv(f, 3, 1, 1, use_bias=False, name="layer3_rn")(l3)
        r4 = TorchConv(f, 3, 1, 1, use_bias=False, name="layer4_rn")(l4)
        p4 = FusionBlock(f, name="refinenet4")(r4, size=r3.shape[-3:-1])
        p3 = FusionBlock(f, name="refinenet3")(p4, r3, size=r2.shape[-3:-1])
        p2 = FusionBlock(f, name="refinenet2")(p3, r2, size=r1.shape[-3:-1])
        p1 = FusionBlock(f, name="refinenet1")(p2, r1)
        if self.return_feature:
            return p1
        h = gelu(TorchConv(f // 2, 3, 1, 1, padding_mode="replicate", name="output_conv_0")(p1))
        h = gelu(TorchConv(16, 3, 1, 1, padding_mode="replicate", name="output_conv_2")(h))
        zeros = nn.initializers.zeros
        return TorchConv(1, 1, kernel_init=zeros, bias_init=zeros, name="output_conv_4")(h)
