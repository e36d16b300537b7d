"""PSNR against pixelSplat's compute_psnr formula and scikit-image's peak_signal_noise_ratio."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio

from locojax import metrics


def test_matches_skimage_after_clipping():
    rng = np.random.default_rng(0)
    a = rng.uniform(-0.2, 1.2, (3, 20, 24, 3))  # out of range on purpose: both sides are clipped
    b = np.clip(a + 0.05 * rng.standard_normal(a.shape), -0.1, 1.1)
    ours = np.asarray(metrics.psnr(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)))
    ref = [peak_signal_noise_ratio(np.clip(b[i], 0, 1), np.clip(a[i], 0, 1), data_range=1.0) for i in range(3)]
    np.testing.assert_allclose(ours, ref, rtol=1e-5)


def test_shapes_vmap_identity_and_errors():
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.random((2, 4, 8, 8, 3), dtype=np.float32))
    b = jnp.asarray(rng.random((2, 4, 8, 8, 3), dtype=np.float32))
    assert metrics.psnr(a, b).shape == (2, 4)
    np.testing.assert_allclose(np.asarray(jax.vmap(metrics.psnr)(a, b)), np.asarray(metrics.psnr(a, b)), rtol=1e-6)
    assert np.all(np.isinf(np.asarray(metrics.psnr(a, a))))  # pixelSplat gives +inf for identical images
    half = jnp.full((1, 4, 4, 3), 0.5)
    np.testing.assert_allclose(float(metrics.psnr(half, jnp.zeros_like(half))[0]), -10 * np.log10(0.25), rtol=1e-6)
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.psnr(a, b[..., :4, :])
