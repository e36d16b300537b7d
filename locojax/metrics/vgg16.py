"""The VGG16 convolutional trunk of LPIPS as a pure function of (params, images).

Same layout as torchvision's `vgg16().features` (13 3x3 convs with padding 1, ReLU, 2x2/2 max pools
that floor odd sizes), tapped after relu1_2, relu2_2, relu3_3, relu4_3 and relu5_3 like
`lpips.pretrained_networks.vgg16`. NHWC activations and HWIO kernels: XLA's native CPU conv layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Number of 3x3 convs in each of the five blocks; a tap ends each block, a max pool starts blocks 2-5.
_BLOCKS = (2, 2, 3, 3, 3)


def _conv3x3_relu(x, kernel, bias, precision):
    y = jax.lax.conv_general_dilated(
        x,
        kernel,
        window_strides=(1, 1),
        padding=((1, 1), (1, 1)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=precision,
    )
    return jax.nn.relu(y + bias)


def _max_pool_2x2(x):
    # VALID padding floors odd sizes exactly like torch's MaxPool2d(2, 2).
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def vgg16_taps(convs, x, *, precision=jax.lax.Precision.HIGHEST):
    """VGG16 features at the five LPIPS taps.

    Args:
      convs: 13 (kernel [3, 3, Cin, Cout], bias [Cout]) pairs, torchvision `features` order.
      x: [B, H, W, 3] float32, already through LPIPS's ScalingLayer.
      precision: conv precision; HIGHEST keeps float32 on GPUs too (TF32 would break the 1e-5 match).
    Returns:
      five arrays [B, H / 2**i, W / 2**i, C_i] (floored), C = 64, 128, 256, 512, 512.
    """
    if len(convs) != sum(_BLOCKS):
        raise ValueError(f"vgg16_taps expects {sum(_BLOCKS)} conv layers, got {len(convs)}")
    taps = []
    layer = 0
    for block, num_convs in enumerate(_BLOCKS):
        if block > 0:
            x = _max_pool_2x2(x)
        for _ in range(num_convs):
            kernel, bias = convs[layer]
            x = _conv3x3_relu(x, kernel, bias, precision)
            layer += 1
        taps.append(x)
    return taps
