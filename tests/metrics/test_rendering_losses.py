"""Rendering losses: paper weights, zero at the target, and where gradients flow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax import losses, metrics


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    target = rng.random((2, 32, 32, 3), dtype=np.float32)
    pred = np.clip(target + 0.1 * rng.standard_normal(target.shape), 0, 1).astype(np.float32)
    return jnp.asarray(pred), jnp.asarray(target)


def test_zero_at_target(images):
    _, target = images
    for cfg in (losses.LOCOSPLAT, losses.GLOBALSPLAT, losses.LOCUSGS):
        loss, _ = losses.rendering_loss(target, target, cfg)
        assert abs(float(loss)) < 1e-6, cfg


def test_paper_weights(images):
    pred, target = images
    mse = float(np.mean((np.asarray(pred) - np.asarray(target)) ** 2))
    lp = float(jnp.mean(metrics.lpips(pred, target)))
    ss = float(jnp.mean(metrics.ssim(pred, target)))
    loco, terms = losses.rendering_loss(pred, target, losses.LOCOSPLAT)
    np.testing.assert_allclose(float(loco), mse + 0.05 * lp, rtol=1e-5)
    np.testing.assert_allclose(float(terms["mse"]), mse, rtol=1e-5)
    glob, _ = losses.rendering_loss(pred, target, losses.GLOBALSPLAT)
    np.testing.assert_allclose(float(glob), 2 * mse + lp, rtol=1e-5)
    locus, _ = losses.rendering_loss(pred, target, losses.LOCUSGS)
    np.testing.assert_allclose(float(locus), mse + 0.2 * (1 - ss), rtol=1e-5)
    tokengs, _ = losses.mse_ssim_loss(pred, target, dssim_scale=0.5)
    np.testing.assert_allclose(float(tokengs), mse + 0.1 * (1 - ss), rtol=1e-5)
    coarse = jnp.clip(pred + 0.05, 0, 1)
    both, _ = losses.locosplat_loss(pred, coarse, target)
    single = lambda p: float(losses.mse_lpips_loss(p, target, lambda_lpips=0.05)[0])
    np.testing.assert_allclose(float(both), single(pred) + 0.9 * single(coarse), rtol=1e-5)


def test_lpips_gradient_reaches_pred_only(images):
    pred, target = images
    loss = lambda p, t: losses.mse_lpips_loss(p, t, lambda_mse=2.0, lambda_lpips=1.0)[0]
    g_pred, g_target = jax.jit(jax.grad(loss, argnums=(0, 1)))(pred, target)
    mse_only = jax.grad(lambda p, t: 2.0 * losses.mse(p, t), argnums=(0, 1))(pred, target)
    # Target gradient is the MSE part only: the LPIPS target trunk is under stop_gradient.
    np.testing.assert_allclose(np.asarray(g_target), np.asarray(mse_only[1]), atol=1e-9)
    # Pred gradient has a real LPIPS part.
    assert np.abs(np.asarray(g_pred - mse_only[0])).max() > 1e-6


def test_ssim_loss_gradient_and_config_errors(images):
    pred, target = images
    g = jax.grad(lambda p: losses.mse_ssim_loss(p, target)[0])(pred)
    assert np.all(np.isfinite(np.asarray(g))) and np.abs(np.asarray(g)).max() > 0
    # A traced weight (a schedule) works; a Python zero skips the term.
    traced = jax.jit(lambda p, w: losses.mse_ssim_loss(p, target, lambda_ssim=w)[0])(pred, 0.2)
    np.testing.assert_allclose(float(traced), float(losses.mse_ssim_loss(pred, target)[0]), rtol=1e-6)
    assert "ssim" not in losses.mse_ssim_loss(pred, target, lambda_ssim=0)[1]
    with pytest.raises(ValueError, match="'kind'"):
        losses.rendering_loss(pred, target, {"kind": "l1"})
    with pytest.raises(ValueError, match="lambda_lpip"):
        losses.rendering_loss(pred, target, {"kind": "mse_lpips", "lambda_lpip": 0.05})
