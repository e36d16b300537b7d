"""Family-neutral loss terms: D-SSIM 'valid' vs scikit-image, D-SSIM 'same' vs an independent scipy
(values) and torch (gradients) implementation of the 3DGS/fused-ssim SSIM, MSE, LPIPS gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from scipy import ndimage
from skimage.metrics import structural_similarity

from locojax import losses, metrics


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    target = rng.random((2, 3, 24, 29, 3), dtype=np.float32)  # [B, V, H, W, 3]
    pred = np.clip(target + 0.15 * rng.standard_normal(target.shape), 0, 1).astype(np.float32)
    return pred, target


def _scipy_same_ssim(pred, target):
    """3DGS loss_utils.ssim / fused-ssim padding="same": Gaussian 11x11 sigma 1.5 (scipy truncate 3.5 =
    radius 5), zero padding, population covariance, mean over all pixels and channels of one image."""
    f = lambda x: ndimage.gaussian_filter(x, sigma=1.5, truncate=3.5, mode="constant", cval=0.0, axes=(0, 1))
    x, y = pred.astype(np.float64), target.astype(np.float64)
    mx, my = f(x), f(y)
    vx, vy, cxy = f(x * x) - mx**2, f(y * y) - my**2, f(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    return np.mean((2 * mx * my + c1) * (2 * cxy + c2) / ((mx**2 + my**2 + c1) * (vx + vy + c2)))


def _torch_same_dssim(pred, target):
    """The same SSIM as a torch depthwise conv2d with zero padding 5 (3DGS `_ssim`), as (1 - SSIM) / 2."""
    g = torch.exp(-0.5 * (torch.arange(11, dtype=torch.float64) - 5) ** 2 / 1.5**2)
    g = g / g.sum()
    w = (g[:, None] * g[None, :]).expand(3, 1, 11, 11).contiguous()
    x = pred.reshape(-1, *pred.shape[-3:]).permute(0, 3, 1, 2)
    y = target.reshape(-1, *target.shape[-3:]).permute(0, 3, 1, 2)
    conv = lambda t: torch.nn.functional.conv2d(t, w, padding=5, groups=3)
    mx, my = conv(x), conv(y)
    vx, vy, cxy = conv(x * x) - mx**2, conv(y * y) - my**2, conv(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = (2 * mx * my + c1) * (2 * cxy + c2) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return (1 - ssim_map.mean()) / 2


def test_mse_and_zero_at_target(images):
    pred, target = images
    np.testing.assert_allclose(float(losses.mse(pred, target)), np.mean((pred - target) ** 2), rtol=1e-6)
    for value in (losses.mse(target, target), losses.dssim(target, target),
                  losses.dssim(target, target, padding="same")):
        assert abs(float(value)) < 1e-6
    with pytest.raises(ValueError, match="differ in shape"):
        losses.mse(pred, target[..., :20, :])


def test_dssim_valid_is_half_one_minus_skimage(images):
    pred, target = images
    ref = np.mean([structural_similarity(t, p, win_size=11, gaussian_weights=True, channel_axis=-1,
                                         data_range=1.0)
                   for p, t in zip(pred.reshape(-1, 24, 29, 3), target.reshape(-1, 24, 29, 3))])
    np.testing.assert_allclose(float(losses.dssim(pred, target)), (1 - ref) / 2, atol=1e-6, rtol=0)


def test_dssim_same_matches_scipy_values_and_torch_gradients(images):
    pred, target = images
    ref_ssim = np.mean([_scipy_same_ssim(p, t) for p, t in zip(pred.reshape(-1, 24, 29, 3),
                                                              target.reshape(-1, 24, 29, 3))])
    ours = float(losses.dssim(pred, target, padding="same"))
    np.testing.assert_allclose(ours, (1 - ref_ssim) / 2, atol=1e-6, rtol=0)
    # 'same' keeps the border pixels, so it differs from 'valid' on the same images.
    assert abs(ours - float(losses.dssim(pred, target))) > 1e-3
    assert metrics.ssim_map(pred, target, padding="same").shape == pred.shape
    # Gradients in both arguments against torch autograd of the 3DGS formula.
    tp = torch.tensor(pred, dtype=torch.float64, requires_grad=True)
    tt = torch.tensor(target, dtype=torch.float64, requires_grad=True)
    ref = _torch_same_dssim(tp, tt)
    ref.backward()
    ref = ref.detach()
    np.testing.assert_allclose(ours, ref.item(), atol=1e-6, rtol=0)
    g_pred, g_target = jax.jit(jax.grad(lambda p, t: losses.dssim(p, t, padding="same"), argnums=(0, 1)))(
        jnp.asarray(pred), jnp.asarray(target))
    scale = np.abs(tp.grad.numpy()).max()
    np.testing.assert_allclose(np.asarray(g_pred), tp.grad.numpy(), atol=1e-4 * scale, rtol=0)
    np.testing.assert_allclose(np.asarray(g_target), tt.grad.numpy(), atol=1e-4 * scale, rtol=0)
    with pytest.raises(ValueError, match="padding"):
        losses.dssim(pred, target, padding="reflect")


def test_lpips_is_mean_metric_with_gradient_into_pred_only():
    rng = np.random.default_rng(1)
    target = jnp.asarray(rng.random((2, 2, 32, 32, 3), dtype=np.float32))
    pred = jnp.clip(target + 0.1 * jnp.asarray(rng.standard_normal(target.shape), jnp.float32), 0, 1)
    params = metrics.lpips_vgg_params()
    np.testing.assert_allclose(float(losses.lpips(pred, target, params=params)),
                               float(jnp.mean(metrics.lpips(pred, target))), rtol=1e-4)
    g_pred, g_target = jax.jit(jax.grad(lambda p, t: losses.lpips(p, t, params=params), argnums=(0, 1)))(
        pred, target)
    assert np.abs(np.asarray(g_pred)).max() > 1e-6
    np.testing.assert_array_equal(np.asarray(g_target), 0.0)  # target trunk under stop_gradient
