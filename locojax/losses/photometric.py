"""Family-neutral photometric loss terms. Each returns a float32 scalar: the mean over every image.

    mse(pred, target)                         mean squared error over pixels, channels, views, scenes
    dssim(pred, target, padding="valid")      (1 - SSIM) / 2, SSIM from `locojax.metrics.ssim`
    lpips(pred, target, params=...)           mean LPIPS-VGG; gradients reach `pred` only

Images are [..., H, W, 3] in [0, 1] (any leading axes, e.g. [B, V, H, W, 3]). Weights are not
arguments: a family's `loss_terms` returns `LossTerm(weight, value)` with weights from its config
(`config.loss`, defaults in the family's `LossConfig`). MSE is a mean (pixelSplat's LossMse), so the
papers' "||.||_2^2" is this mean.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.metrics.lpips import lpips_with_params
from locojax.metrics.ssim import PADDINGS
from locojax.metrics.ssim import ssim as ssim_metric


def mse(pred, target):
    """Mean squared error over all elements: [..., H, W, 3] x 2 -> scalar (float32)."""
    if pred.shape != target.shape:
        raise ValueError(f"mse: pred {pred.shape} and target {target.shape} differ in shape")
    return jnp.mean((pred.astype(jnp.float32) - target.astype(jnp.float32)) ** 2)


def dssim(pred, target, *, padding: str = "valid"):
    """D-SSIM = (1 - mean SSIM) / 2 over all images: [..., H, W, 3] x 2 -> scalar in [0, 1].

    The /2 maps SSIM's [-1, 1] to [0, 1] and is what TokenGS's released loss uses (`(1 - ssim) / 2`),
    so LocusGS's lambda_SSIM = 0.2 (eq. 26) multiplies this value.
      padding="valid": skimage/pixelSplat SSIM (the evaluation metric's 'valid' 11x11 windows, sample
        covariance), images at least 11 pixels a side.
      padding="same": 3DGS/fused-ssim SSIM (11x11 Gaussian sigma 1.5, zero 'same' padding, population
        covariance), what TokenGS/LocusGS train with (`fused_ssim(pred, gt)`, default padding "same").
    Differentiable in both arguments.
    """
    if padding not in PADDINGS:
        raise ValueError(f"dssim: padding={padding!r}; expected one of {PADDINGS}")
    return (1.0 - jnp.mean(ssim_metric(pred, target, padding=padding))) / 2.0


def lpips(pred, target, *, params=None, precision=jax.lax.Precision.DEFAULT):
    """Mean LPIPS-VGG (v0.1, normalize=True) over all images: [..., H, W, 3] x 2 -> scalar.

    params: the LPIPS weights pytree (`locojax.metrics.lpips_vgg_params()`). Inside a jitted training
    step pass them in as part of the step's arguments (a family keeps them in its params under a
    "frozen" label) instead of letting them become a 58 MB constant; None loads them here (eager use
    and tests). Gradients reach `pred` only (weights and target under stop_gradient). precision
    DEFAULT lets GPUs use TF32/bf16 passes for the loss; the metric uses HIGHEST.
    """
    if pred.shape != target.shape:
        raise ValueError(f"lpips: pred {pred.shape} and target {target.shape} differ in shape")
    if params is None:
        from locojax.metrics.lpips_weights import lpips_vgg_params

        params = lpips_vgg_params()
    flat = lambda x: x.reshape((-1,) + x.shape[-3:]).astype(jnp.float32)  # noqa: E731
    return jnp.mean(lpips_with_params(params, flat(pred), flat(target), precision=precision))
