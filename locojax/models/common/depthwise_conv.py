"""Depthwise 2-D convolution (torch `nn.Conv2d(C, C, k, groups=C)`) whose filter gradient compiles
to one grouped convolution on XLA:CPU.

Why: JAX transposes a depthwise conv to a filter-gradient conv with `batch_group_count=C`. XLA:CPU
has no kernel for that and rewrites it (`BatchGroupCountRewriter`/`ConvolutionGroupConverter`) into a
*dense* C x C convolution, a diagonal mask and a reduce: C times the work and five kernels per conv
(two layout copies, the conv, a select, a reduce or reduce-window; docs/performance.md,
"depthwise convolutions"). The same gradient is a `feature_group_count=C` convolution with the
image as the input (channel-major features (c, n)) and the output gradient as the kernel:

    dK[i, j, c] = sum_{n, h, w} x[n, i*dh + h*sh, j*dw + w*sw, c] * g[n, h, w, c]

which XLA:CPU runs as one grouped conv (batch folded into 1, N input features per group). The
forward pass and the input gradient are `lax.conv_general_dilated` unchanged. On GPU/TPU the
library's backward-filter conv is kept (chosen when lowering, `platform_choice.cpu_or_accelerator`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from locojax.platform_choice import cpu_or_accelerator

_DIMS = ("NHWC", "HWIO", "NHWC")


def _forward(x, kernel, strides, dilation):
    return jax.lax.conv_general_dilated(x, kernel, strides, "VALID", rhs_dilation=dilation,
                                        dimension_numbers=_DIMS, feature_group_count=x.shape[-1])


def depthwise_filter_grad(x, g, kernel_hw, strides=(1, 1), dilation=(1, 1)):
    """Gradient of a VALID depthwise conv with respect to its kernel, as one grouped convolution.

    Args:
      x: [N, H, W, C] conv input (already padded).
      g: [N, Ho, Wo, C] gradient of the conv output.
      kernel_hw: (kh, kw). strides, dilation: pairs, as in the forward conv.
    Returns:
      [kh, kw, 1, C] in x's dtype.
    """
    n, _, _, c = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, strides, dilation
    ho, wo = g.shape[1:3]
    # rows/columns no output reads (stride remainder) would widen the result: crop them (fuses into the copy)
    hx, wx = (kh - 1) * dh + (ho - 1) * sh + 1, (kw - 1) * dw + (wo - 1) * sw + 1
    lhs = jnp.transpose(x[:, :hx, :wx, :], (1, 2, 3, 0)).reshape(1, hx, wx, c * n)  # features (c, n)
    out = jax.lax.conv_general_dilated(
        lhs, g, window_strides=(dh, dw), padding="VALID", rhs_dilation=(sh, sw),
        dimension_numbers=("NHWC", "IHWO", "NHWC"), feature_group_count=c)  # g read as [I=N, Ho, Wo, O=C]
    return out.reshape(kh, kw, 1, c)


def _library_filter_grad(x, g, kernel_hw, strides, dilation):
    """The filter gradient JAX derives itself (batch_group_count conv): fast library call on GPU/TPU."""
    kernel = jnp.zeros(tuple(kernel_hw) + (1, x.shape[-1]), x.dtype)
    _, vjp = jax.vjp(lambda k: _forward(x, k, strides, dilation), kernel)
    return vjp(g)[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def depthwise_conv2d(x, kernel, strides=(1, 1), dilation=(1, 1)):
    """VALID depthwise conv, channel multiplier 1 (torch `Conv2d(C, C, k, groups=C, padding=0)`).

    Args:
      x: [N, H, W, C] (pad beforehand for torch's `padding`/`padding_mode`).
      kernel: [kh, kw, 1, C] (HWIO, as flax/`TorchConv` store it).
      strides, dilation: (sh, sw), (dh, dw) tuples of ints.
    Returns:
      [N, Ho, Wo, C], Ho = (H - dh*(kh-1) - 1) // sh + 1 (likewise Wo); identical to
      `lax.conv_general_dilated(..., feature_group_count=C)`, and so are both gradients.
    """
    return _forward(x, kernel, strides, dilation)


def _depthwise_fwd(x, kernel, strides, dilation):
    return _forward(x, kernel, strides, dilation), (x, kernel)


def _depthwise_bwd(strides, dilation, residuals, g):
    x, kernel = residuals
    _, vjp_x = jax.vjp(lambda x_: _forward(x_, kernel, strides, dilation), x)
    (dx,) = vjp_x(g)
    kernel_hw = kernel.shape[:2]
    dk = cpu_or_accelerator(
        lambda x_, g_: depthwise_filter_grad(x_, g_, kernel_hw, strides, dilation),
        lambda x_, g_: _library_filter_grad(x_, g_, kernel_hw, strides, dilation), x, g)
    return dx, dk.astype(kernel.dtype)


depthwise_conv2d.defvjp(_depthwise_fwd, _depthwise_bwd)
