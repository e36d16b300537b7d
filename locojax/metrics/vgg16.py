"""The VGG16 convolutional trunk of LPIPS as a pure function of (params, images).

Same layout as torchvision's `vgg16().features` (13 3x3 convs with padding 1, ReLU, 2x2/2 max pools
that floor odd sizes), tapped after relu1_2, relu2_2, relu3_3, relu4_3 and relu5_3 like
`lpips.pretrained_networks.vgg16`. NHWC activations and HWIO kernels: XLA's native CPU conv layout.

Choices here for speed on XLA:CPU (same values, see tests/metrics/test_vgg16_fast_paths.py):
- `conv_impl="winograd"` (what "auto" picks on CPU for images >= 128 px a side) computes the 3x3 convs
  of blocks 3-5 as Winograd F(4x4, 3x3) (`winograd.py`, 4x fewer multiplies). Measured, one pinned
  core, 8 pairs at 256x256: LPIPS forward 6.3 s with XLA's convs -> 5.0 s. Blocks 1-2 stay direct (their
  Winograd transforms are memory-bound: F(4, 3) was ~1.3x slower at 256^2 x 64 channels). On GPU/TPU
  "auto" keeps XLA's conv (cuDNN is faster there than transforms + GEMMs written in jnp);
- the conv has a hand-written VJP (input gradient = the same 3x3 conv with the flipped, in/out-swapped
  kernel). Autodiff's transposed conv is as fast batched, but inside a `lax.map` loop body (which
  `lpips.py` uses on CPU) XLA:CPU ran it ~5x slower than a plain forward conv;
- the max pool is a reshape + max over the 2x2 window instead of `reduce_window`: its gradient is then
  a select instead of XLA's `select_and_scatter`, which measured 3-5x slower on CPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from locojax.platform_choice import cpu_or_accelerator
from locojax.metrics.winograd import flipped_kernel, winograd_conv3x3_same, winograd_filter

# Number of 3x3 convs in each of the five blocks; a tap ends each block, a max pool starts blocks 2-5.
_BLOCKS = (2, 2, 3, 3, 3)


def _conv3x3(x, kernel, precision):
    return jax.lax.conv_general_dilated(
        x,
        kernel,
        window_strides=(1, 1),
        padding=((1, 1), (1, 1)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=precision,
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv3x3_same(x, kernel, precision):
    """3x3, stride 1, padding 1 conv: x [B, H, W, Cin], kernel [3, 3, Cin, Cout] -> [B, H, W, Cout]."""
    return _conv3x3(x, kernel, precision)


def _conv3x3_fwd(x, kernel, precision):
    return _conv3x3(x, kernel, precision), (x, kernel)


def _conv3x3_bwd(precision, residuals, g):
    x, kernel = residuals
    # d/dx of a 'same' 3x3 correlation is the 'same' correlation with the spatially flipped kernel whose
    # in/out channels are swapped: a plain forward conv, which XLA:CPU runs fast in any context.
    g_x = _conv3x3(g, flipped_kernel(kernel), precision)
    # The kernel gradient via autodiff; XLA removes it when nobody uses it (LPIPS stops weight gradients).
    _, kernel_vjp = jax.vjp(lambda k: _conv3x3(x, k, precision), kernel)
    return g_x, kernel_vjp(g)[0]


conv3x3_same.defvjp(_conv3x3_fwd, _conv3x3_bwd)


def _max_pool_2x2(x):
    """2x2 / stride 2 max pool [B, H, W, C] -> [B, H // 2, W // 2, C]; odd sizes floor like torch's MaxPool2d.

    Gradient: to the window's maximum (split evenly between exact ties, where torch picks one; after a
    ReLU, ties are in practice zeros, whose ReLU gradient is zero either way).
    """
    b, h, w, c = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2]
    return jnp.max(x.reshape(b, h // 2, 2, w // 2, 2, c), axis=(2, 4))


CONV_IMPLS = ("auto", "xla", "winograd")
# Winograd tile per block when conv_impl="winograd" (None = XLA's conv). Blocks 1-2 (256^2 / 128^2 pixels,
# 64 / 128 channels at 256x256 input) are memory-bound in the Winograd transforms and stay direct.
WINOGRAD_TILES = (None, None, 4, 4, 4)


# "auto" uses Winograd only from this image size (min(H, W)) on: below it the trunk is cheap anyway and
# the Winograd graph's extra XLA compile time (~3 s forward, ~10 s forward+backward on this CPU) dominates.
WINOGRAD_AUTO_MIN_SIZE = 128


def resolve_conv_impl(conv_impl, image_hw=None, platform=None):
    """"auto" -> "winograd" on CPU for images of at least WINOGRAD_AUTO_MIN_SIZE (fewer FLOPs win there),
    else "xla" (cuDNN / TPU convs, and small CPU images). platform: "cpu" or another platform name
    (None: `jax.default_backend()`, for eager callers; traced code uses `vgg16_taps`'s lowering-time
    choice)."""
    if conv_impl not in CONV_IMPLS:
        raise ValueError(f"conv_impl must be one of {CONV_IMPLS}, got {conv_impl!r}")
    if conv_impl == "auto":
        platform = jax.default_backend() if platform is None else platform
        large = image_hw is None or min(image_hw) >= WINOGRAD_AUTO_MIN_SIZE
        return "winograd" if platform == "cpu" and large else "xla"
    return conv_impl


def prepare_trunk(convs, conv_impl="auto", *, precision=jax.lax.Precision.HIGHEST, image_hw=None):
    """Per-layer weights for `trunk_taps`: (layers, tiles).

    layers: 13 (weight, bias); weight is the HWIO kernel where tiles[i] is None, else (kernel, its
    Winograd filters, the flipped kernel's filters for the backward) [(tile + 2)^2, Cin, Cout] each. Do
    this once outside any loop over images (the filter transforms then run once per call).
    """
    if len(convs) != sum(_BLOCKS):
        raise ValueError(f"vgg16 trunk expects {sum(_BLOCKS)} conv layers, got {len(convs)}")
    impl = resolve_conv_impl(conv_impl, image_hw)
    block_tiles = WINOGRAD_TILES if impl == "winograd" else (None,) * len(_BLOCKS)
    tiles = tuple(t for t, n in zip(block_tiles, _BLOCKS) for _ in range(n))
    layers = []
    for (kernel, bias), tile in zip(convs, tiles):
        if tile is not None:
            kernel = (kernel, winograd_filter(kernel, tile, precision=precision),
                      winograd_filter(flipped_kernel(kernel), tile, precision=precision))
        layers.append((kernel, bias))
    return layers, tiles


def trunk_taps(layers, tiles, x, *, precision=jax.lax.Precision.HIGHEST):
    """`vgg16_taps` on prepared weights (`prepare_trunk`)."""
    taps = []
    layer = 0
    for block, num_convs in enumerate(_BLOCKS):
        if block > 0:
            x = _max_pool_2x2(x)
        for _ in range(num_convs):
            weight, bias = layers[layer]
            if tiles[layer] is None:
                y = conv3x3_same(x, weight, precision)
            else:
                y = winograd_conv3x3_same(x, *weight, tiles[layer], precision)
            x = jax.nn.relu(y + bias)
            layer += 1
        taps.append(x)
    return taps


def vgg16_taps(convs, x, *, precision=jax.lax.Precision.HIGHEST, conv_impl="auto"):
    """VGG16 features at the five LPIPS taps.

    Args:
      convs: 13 (kernel [3, 3, Cin, Cout], bias [Cout]) pairs, torchvision `features` order.
      x: [B, H, W, 3] float32, already through LPIPS's ScalingLayer.
      precision: conv precision; HIGHEST keeps float32 on GPUs too (TF32 would break the 1e-5 match).
      conv_impl: "xla" (lax.conv_general_dilated everywhere: the reference), "winograd" (Winograd
        F(4x4, 3x3) in blocks 3-5, see WINOGRAD_TILES), or "auto" (winograd on CPU for images of at
        least WINOGRAD_AUTO_MIN_SIZE pixels a side, xla otherwise; chosen when lowering, so a module
        lowered for cuda or tpu carries xla whatever the host).
    Returns:
      five arrays [B, H / 2**i, W / 2**i, C_i] (floored), C = 64, 128, 256, 512, 512.
    """
    hw = x.shape[1:3]

    def taps(impl, convs, x):
        layers, tiles = prepare_trunk(convs, impl, precision=precision, image_hw=hw)
        return trunk_taps(layers, tiles, x, precision=precision)

    on_cpu = resolve_conv_impl(conv_impl, hw, platform="cpu")
    elsewhere = resolve_conv_impl(conv_impl, hw, platform="gpu")
    return cpu_or_accelerator(functools.partial(taps, on_cpu), functools.partial(taps, elsewhere), convs, x, same=on_cpu == elsewhere)
