"""locojax SSIM against scikit-image's structural_similarity as pixelSplat calls it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from skimage import data, transform
from skimage.metrics import structural_similarity

from locojax import metrics


def _skimage_ssim(pred, target):
    # pixelSplat compute_ssim: structural_similarity(gt, hat, win_size=11, gaussian_weights=True, ...)
    return structural_similarity(target, pred, win_size=11, gaussian_weights=True, channel_axis=-1, data_range=1.0)


@pytest.mark.parametrize("shape", [(11, 11, 3), (37, 45, 3), (64, 64, 3), (20, 33, 1)])
def test_random_images(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.random(shape).astype(np.float32)
    b = np.clip(a + 0.2 * rng.standard_normal(shape), 0, 1).astype(np.float32)
    np.testing.assert_allclose(float(metrics.ssim(a, b)), _skimage_ssim(a, b), atol=1e-5, rtol=0)
    c = rng.random(shape).astype(np.float32)  # unrelated image: SSIM near 0
    np.testing.assert_allclose(float(metrics.ssim(a, c)), _skimage_ssim(a, c), atol=1e-5, rtol=0)


def test_real_images_float32_and_float64():
    rng = np.random.default_rng(0)
    astro = data.astronaut()[::2, ::2].astype(np.float32) / 255.0  # 256x256, real statistics
    cat = transform.resize(data.chelsea(), (256, 256), anti_aliasing=True).astype(np.float32)
    noisy = np.clip(astro + 0.05 * rng.standard_normal(astro.shape), 0, 1).astype(np.float32)
    pred = np.stack([noisy, cat, astro])
    target = np.stack([astro, astro, cat[::-1]])
    ours = np.asarray(metrics.ssim(jnp.asarray(pred), jnp.asarray(target)))
    for i in range(3):
        np.testing.assert_allclose(ours[i], _skimage_ssim(pred[i], target[i]), atol=1e-5, rtol=0)
        ref64 = _skimage_ssim(pred[i].astype(np.float64), target[i].astype(np.float64))
        np.testing.assert_allclose(ours[i], ref64, atol=1e-5, rtol=0)


def test_identity_batch_vmap_jit_and_errors():
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.random((2, 3, 16, 16, 3), dtype=np.float32))
    b = jnp.asarray(rng.random((2, 3, 16, 16, 3), dtype=np.float32))
    np.testing.assert_allclose(np.asarray(metrics.ssim(a, a)), 1.0, atol=1e-6)
    batched = metrics.ssim(a, b)
    assert batched.shape == (2, 3)
    np.testing.assert_allclose(np.asarray(jax.vmap(metrics.ssim)(a, b)), np.asarray(batched), atol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(metrics.ssim)(a, b)), np.asarray(batched), atol=1e-6)
    with pytest.raises(ValueError, match="smaller than"):
        metrics.ssim(a[..., :8, :8, :], b[..., :8, :8, :])
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.ssim(a, b[..., :12, :])


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    a = rng.random((16, 18, 3))
    b = np.clip(a + 0.2 * rng.standard_normal(a.shape), 0, 1)
    d = rng.standard_normal(a.shape)
    f = lambda x: metrics.ssim(x, jnp.asarray(b, jnp.float32))
    g_pred, g_target = jax.grad(lambda x, y: metrics.ssim(x, y), argnums=(0, 1))(
        jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    )
    assert np.all(np.isfinite(g_pred)) and np.abs(np.asarray(g_target)).max() > 0  # both sides differentiable
    eps = 1e-2
    fd = (float(f(jnp.asarray(a + eps * d, jnp.float32))) - float(f(jnp.asarray(a - eps * d, jnp.float32)))) / (2 * eps)
    # skimage as an independent value oracle for the finite difference too (float64)
    fd_ref = (_skimage_ssim(a + eps * d, b) - _skimage_ssim(a - eps * d, b)) / (2 * eps)
    np.testing.assert_allclose(float(jnp.sum(g_pred * d)), fd_ref, rtol=2e-3, atol=1e-5)
    np.testing.assert_allclose(fd, fd_ref, rtol=2e-3, atol=1e-4)


def test_ssim_map_is_skimage_full_map_cropped():
    rng = np.random.default_rng(3)
    a = rng.random((30, 40, 3)).astype(np.float32)
    b = rng.random((30, 40, 3)).astype(np.float32)
    _, full = structural_similarity(b, a, win_size=11, gaussian_weights=True, channel_axis=-1, data_range=1.0, full=True)
    ours = np.asarray(metrics.ssim_map(a, b))
    assert ours.shape == (20, 30, 3)
    np.testing.assert_allclose(ours, full[5:-5, 5:-5], atol=1e-5, rtol=0)
