"""PSNR as pixelSplat's `compute_psnr`: clip both images to [0, 1], MSE per image, -10 log10(MSE)."""

from __future__ import annotations

import jax.numpy as jnp


def psnr(pred, target):
    """[..., H, W, C] -> [...] in dB (peak 1). Identical images give +inf, as in pixelSplat."""
    if pred.shape != target.shape:
        raise ValueError(f"psnr: pred {pred.shape} and target {target.shape} differ in shape")
    if pred.ndim < 3:
        raise ValueError(f"psnr: expected [..., H, W, C] images, got shape {pred.shape}")
    pred = jnp.clip(pred.astype(jnp.float32), 0.0, 1.0)
    target = jnp.clip(target.astype(jnp.float32), 0.0, 1.0)
    mse = jnp.mean((pred - target) ** 2, axis=(-3, -2, -1))
    return -10.0 * jnp.log10(mse)
