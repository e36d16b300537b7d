"""UniMatch's CNNEncoder (DepthSplat `unimatch/backbone.py`) with lowest resolution 1/4.

[N, H, W, 3] -> features high to low resolution: 1/2 (64 ch, after layer1), 1/2 (96 ch, layer2
with stride 1 because the lowest resolution is 1/4), 1/4 (`output_dim` ch, layer3 + 1x1 conv).
InstanceNorm2d without affine parameters (torch's default), eps 1e-5.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.layers import TorchConv

# UniMatch inits convs kaiming_normal(fan_out, relu).
KAIMING_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def instance_norm(x, eps: float = 1e-5):
    """torch.nn.InstanceNorm2d(affine=False): per-sample, per-channel over H, W (biased variance)."""
    xf = x.astype(jnp.float32)
    mean = xf.mean(axis=(-3, -2), keepdims=True)
    var = jnp.square(xf - mean).mean(axis=(-3, -2), keepdims=True)
    return ((xf - mean) * jax.lax.rsqrt(var + eps)).astype(x.dtype)


class ResidualBlock(nn.Module):
    planes: int
    stride: int = 1
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        conv = lambda f, k, s, p, b, n: TorchConv(f, k, s, p, use_bias=b, dtype=self.dtype,  # noqa: E731
                                                  kernel_init=KAIMING_FAN_OUT, name=n)
        y = jax.nn.relu(instance_norm(conv(self.planes, 3, self.stride, 1, False, "conv1")(x)))
        y = jax.nn.relu(instance_norm(conv(self.planes, 3, 1, 1, False, "conv2")(y)))
        if self.stride != 1 or x.shape[-1] != self.planes:
            x = instance_norm(conv(self.planes, 1, self.stride, 0, True, "downsample_0")(x))
        return jax.nn.relu(x + y)


class CNNEncoder(nn.Module):
    """x [N, H, W, 3] -> [f_1/2 [N, H/2, W/2, 64], f_1/2 [N, H/2, W/2, 96], f_1/4 [N, H/4, W/4, C]]."""

    output_dim: int = 128
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        x = TorchConv(64, 7, 2, 3, use_bias=False, dtype=self.dtype, kernel_init=KAIMING_FAN_OUT,
                      name="conv1")(x)
        x = jax.nn.relu(instance_norm(x))
        outs = []
        for li, (dim, stride) in enumerate([(64, 1), (96, 1), (128, 2)], start=1):
            x = ResidualBlock(dim, stride, self.dtype, name=f"layer{li}_0")(x)
            x = ResidualBlock(dim, 1, self.dtype, name=f"layer{li}_1")(x)
            if li < 3:
                outs.append(x)
        x = TorchConv(self.output_dim, 1, 1, 0, dtype=self.dtype, kernel_init=KAIMING_FAN_OUT, name="conv2")(x)
        return outs + [x]
