"""Building blocks with the PyTorch semantics the official codes of all three families use, so
weights convert 1:1 and forward passes match their fixtures.

Porting notes, written once here: torch LayerNorm eps is 1e-5 (flax's default is 1e-6); torch GELU
is exact (`approximate=False`; flax's default is the tanh approximation); torch `nn.Linear` and
`nn.Conv2d` initialise kernel *and bias* as U(+-1/sqrt(fan_in)) (flax: lecun-normal kernel, zero
bias); timm-style ViTs re-initialise Linear layers with trunc_normal(std=0.02) and zero bias.
Parameters are always float32 (`param_dtype`); `dtype` is the compute dtype of a module.
Sub-module names follow torch attribute names (`name.<i>` becomes `name_<i>`), which is what the
families' converters rely on.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.attention import multihead_attention

TORCH_LN_EPS = 1e-5
# timm's ViT init (and GlobalSplat's `_init_encoder_weights`): trunc_normal(std=0.02) kernels, zero bias.
TRUNC_NORMAL_002 = nn.initializers.truncated_normal(stddev=0.02)
# torch's default kernel init, kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in)), for Dense and Conv
# kernels (flax's fan_in of a conv kernel [kh, kw, in/groups, out] is kh * kw * in / groups, as torch's).
TORCH_DEFAULT_INIT = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def gelu(x):
    """torch.nn.GELU() (exact, erf-based)."""
    return nn.gelu(x, approximate=False)


def torch_bias_init(fan_in: int) -> Callable:
    """torch's default bias init for a layer with `fan_in` inputs: U(+-1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(max(int(fan_in), 1))

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def layer_norm(name: str, dtype: Any = jnp.float32, *, use_bias: bool = True, use_scale: bool = True
               ) -> nn.LayerNorm:
    """torch.nn.LayerNorm(dim) (eps 1e-5); statistics in float32 whatever the compute dtype."""
    return nn.LayerNorm(epsilon=TORCH_LN_EPS, dtype=dtype, param_dtype=jnp.float32, use_bias=use_bias,
                        use_scale=use_scale, name=name)


def dense(features: int, name: str, dtype: Any = jnp.float32, *, use_bias: bool = True,
          kernel_init=TRUNC_NORMAL_002, bias_init=nn.initializers.zeros) -> nn.Dense:
    """nn.Dense with float32 params; the default init is timm's (trunc_normal 0.02, zero bias).
    For torch's default `nn.Linear` init use `TorchDense`."""
    return nn.Dense(features, use_bias=use_bias, dtype=dtype, param_dtype=jnp.float32,
                    kernel_init=kernel_init, bias_init=bias_init, name=name)


class TorchDense(nn.Module):
    """torch.nn.Linear with its default init (kernel and bias U(+-1/sqrt(fan_in))).

    Parameters are named `kernel` [in, out] and `bias` [out], like nn.Dense (torch weight = kernel.T).
    `kernel_init` / `bias_init` replace the torch defaults (e.g. a zero-initialised last layer)."""

    features: int
    use_bias: bool = True
    dtype: Any = jnp.float32
    kernel_init: Optional[Callable] = None
    bias_init: Optional[Callable] = None

    @nn.compact
    def __call__(self, x):
        fan_in = x.shape[-1]
        kernel = self.param("kernel", self.kernel_init or TORCH_DEFAULT_INIT, (fan_in, self.features),
                            jnp.float32)
        y = jnp.dot(x.astype(self.dtype), kernel.astype(self.dtype))
        if self.use_bias:
            bias = self.param("bias", self.bias_init or torch_bias_init(fan_in), (self.features,), jnp.float32)
            y = y + bias.astype(self.dtype)
        return y


def _pad_spatial(x, pad: Sequence[tuple[int, int]], mode: str):
    """Pads the two spatial axes of NHWC `x`; mode is torch's padding_mode."""
    if all(p == (0, 0) for p in pad):
        return x
    widths = ((0, 0), tuple(pad[0]), tuple(pad[1]), (0, 0))
    np_mode = {"zeros": "constant", "replicate": "edge", "reflect": "reflect", "circular": "wrap"}
    if mode not in np_mode:
        raise ValueError(f"padding_mode={mode!r}: expected one of {sorted(np_mode)}")
    return jnp.pad(x, widths, mode=np_mode[mode])


class TorchConv(nn.Module):
    """torch.nn.Conv2d on NHWC inputs, with torch's default init and padding modes.

    Attributes:
      features: output channels. kernel_size, stride, dilation: ints or pairs.
      padding: int / pair (symmetric, torch's `padding=`), or "same" / "valid".
      padding_mode: "zeros", "replicate", "reflect" or "circular" (torch's names).
      groups: feature groups (in_channels for depthwise). Kernel [kh, kw, in/groups, out].
    Input [..., H, W, C_in] (any leading axes) -> [..., H', W', features].
    """

    features: int
    kernel_size: Any = 3
    stride: Any = 1
    padding: Any = 0
    padding_mode: str = "zeros"
    dilation: Any = 1
    groups: int = 1
    use_bias: bool = True
    dtype: Any = jnp.float32
    kernel_init: Optional[Callable] = None
    bias_init: Optional[Callable] = None

    @nn.compact
    def __call__(self, x):
        pair = lambda v: (int(v), int(v)) if isinstance(v, int) else tuple(int(a) for a in v)  # noqa: E731
        kh, kw = pair(self.kernel_size)
        sh, sw = pair(self.stride)
        dh, dw = pair(self.dilation)
        c_in = x.shape[-1]
        if c_in % self.groups or self.features % self.groups:
            raise ValueError(f"TorchConv: channels {c_in} -> {self.features} not divisible by groups={self.groups}")
        kernel = self.param("kernel", self.kernel_init or TORCH_DEFAULT_INIT,
                            (kh, kw, c_in // self.groups, self.features), jnp.float32)
        if isinstance(self.padding, str):
            if self.padding.lower() == "valid":
                pad = ((0, 0), (0, 0))
            elif self.padding.lower() == "same":  # torch's 'same' (stride 1): extra pixel at the end
                eh, ew = dh * (kh - 1), dw * (kw - 1)
                pad = ((eh // 2, eh - eh // 2), (ew // 2, ew - ew // 2))
            else:
                raise ValueError(f"TorchConv padding={self.padding!r}")
        else:
            ph, pw = pair(self.padding)
            pad = ((ph, ph), (pw, pw))
        lead = x.shape[:-3]
        x = x.reshape((-1,) + x.shape[-3:]).astype(self.dtype)
        x = _pad_spatial(x, pad, self.padding_mode)
        y = jax.lax.conv_general_dilated(
            x, kernel.astype(self.dtype), window_strides=(sh, sw), padding="VALID",
            rhs_dilation=(dh, dw), dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=self.groups)
        if self.use_bias:
            fan_in = kh * kw * c_in // self.groups
            bias = self.param("bias", self.bias_init or torch_bias_init(fan_in), (self.features,), jnp.float32)
            y = y + bias.astype(self.dtype)
        return y.reshape(lead + y.shape[-3:])


class LayerScale(nn.Module):
    """x * gamma, gamma [D] initialised to `init_value` (CaiT/DINOv2 LayerScale)."""

    dim: int
    init_value: float

    @nn.compact
    def __call__(self, x):
        gamma = self.param("gamma", nn.initializers.constant(self.init_value), (self.dim,), jnp.float32)
        return x * gamma.astype(x.dtype)


class HeadLayerNorm(nn.Module):
    """LayerNorm over each head's channels, shared by all heads (timm `qk_norm`: nn.LayerNorm(head_dim)
    applied to [B, N, H, dh]). [B, N, H * dh] -> same shape."""

    heads: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        b, n, d = x.shape
        y = layer_norm("norm", self.dtype)(x.reshape(b, n, self.heads, d // self.heads))
        return y.reshape(b, n, d)


class SelfAttention(nn.Module):
    """timm/DINOv2 `Attention`: fused qkv Linear (output laid out [3, heads, dh]), optional per-head
    q/k LayerNorm (`qk_norm`), additive `bias` broadcastable to [B, heads, N, N], and `proj`."""

    dim: int
    heads: int
    dtype: Any = jnp.float32
    attention_impl: Any = None
    query_chunk: Any = None  # see `multihead_attention`
    qk_norm: bool = False
    kernel_init: Callable = TRUNC_NORMAL_002

    @nn.compact
    def __call__(self, x, bias=None):
        b, n, d = x.shape
        qkv = dense(3 * self.dim, "qkv", self.dtype, kernel_init=self.kernel_init)(x).reshape(b, n, 3, d)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if self.qk_norm:
            q = HeadLayerNorm(self.heads, self.dtype, name="q_norm")(q)
            k = HeadLayerNorm(self.heads, self.dtype, name="k_norm")(k)
        out = multihead_attention(q, k, v, self.heads, bias=bias, implementation=self.attention_impl,
                                  query_chunk=self.query_chunk)
        return dense(self.dim, "proj", self.dtype, kernel_init=self.kernel_init)(out)


class Mlp(nn.Module):
    """fc1 -> exact GELU -> fc2 (timm `Mlp`)."""

    dim: int
    hidden: int
    dtype: Any = jnp.float32
    out_dim: Optional[int] = None
    kernel_init: Callable = TRUNC_NORMAL_002

    @nn.compact
    def __call__(self, x):
        h = gelu(dense(self.hidden, "fc1", self.dtype, kernel_init=self.kernel_init)(x))
        return dense(self.out_dim or self.dim, "fc2", self.dtype, kernel_init=self.kernel_init)(h)


class SelfAttentionBlock(nn.Module):
    """Pre-norm transformer block with LayerScale (timm/DINOv2 `Block`):
    x += ls1(attn(norm1(x))); x += ls2(mlp(norm2(x)))."""

    dim: int
    heads: int
    mlp_ratio: float = 4.0
    init_value: float = 1e-2
    dtype: Any = jnp.float32
    attention_impl: Any = None
    query_chunk: Any = None
    qk_norm: bool = False
    kernel_init: Callable = TRUNC_NORMAL_002

    @nn.compact
    def __call__(self, x, bias=None):
        attn = SelfAttention(self.dim, self.heads, self.dtype, self.attention_impl, self.query_chunk,
                             self.qk_norm, self.kernel_init, name="attn")
        h = attn(layer_norm("norm1", self.dtype)(x), bias)
        x = x + LayerScale(self.dim, self.init_value, name="ls1")(h)
        h = Mlp(self.dim, int(round(self.dim * self.mlp_ratio)), self.dtype, kernel_init=self.kernel_init,
                name="mlp")(layer_norm("norm2", self.dtype)(x))
        return x + LayerScale(self.dim, self.init_value, name="ls2")(h)
