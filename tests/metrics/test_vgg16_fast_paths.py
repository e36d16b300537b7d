"""The CPU speed paths of the LPIPS trunk against the plain XLA / autodiff formulations.

- `conv3x3_same` (hand-written VJP) vs `lax.conv_general_dilated` under autodiff: values, input and kernel
  gradients.
- the reshape+max pool vs `lax.reduce_window` (which is what torch's MaxPool2d(2, 2) computes; its
  autodiff gradient is XLA's select_and_scatter), odd sizes included.
- `lpips_with_params(pairs_per_step=k)` (a lax.map over chunks, remainder included) vs one batched pass.
- Winograd F(2x2, 3x3) / F(4x4, 3x3) convs (custom VJP) vs `lax.conv_general_dilated` under autodiff, and
  the Winograd trunk vs the XLA trunk (the 256x256 LPIPS-vs-torch test also runs the Winograd path, which
  "auto" picks there on CPU).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax import metrics
from locojax.metrics.lpips_weights import load_lpips_vgg_numpy
from locojax.metrics.vgg16 import _max_pool_2x2, conv3x3_same, resolve_conv_impl, vgg16_taps
from locojax.metrics.winograd import flipped_kernel, winograd_conv3x3_same, winograd_filter

HIGHEST = jax.lax.Precision.HIGHEST


def _reference_conv(x, k):
    return jax.lax.conv_general_dilated(x, k, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        precision=HIGHEST)


def test_conv3x3_custom_vjp_matches_autodiff():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((2, 7, 9, 5)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((3, 3, 5, 4)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((2, 7, 9, 4)), jnp.float32)  # a non-uniform cotangent
    loss = lambda conv: (lambda x, k: jnp.sum(w * jnp.sin(conv(x, k))))
    ours = jax.jit(jax.value_and_grad(loss(lambda x, k: conv3x3_same(x, k, HIGHEST)), argnums=(0, 1)))(x, k)
    ref = jax.value_and_grad(loss(_reference_conv), argnums=(0, 1))(x, k)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5)
    np.testing.assert_allclose(ours[1][0], ref[1][0], atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(ours[1][1], ref[1][1], atol=1e-4, rtol=1e-5)
    # Also inside lax.map (the LPIPS CPU path) and under vmap.
    mapped = jax.grad(lambda x: jnp.sum(jax.lax.map(lambda xi: jnp.sin(conv3x3_same(xi[None], k, HIGHEST)), x)
                                        * w[:, None]))(x)
    np.testing.assert_allclose(mapped, ref[1][0], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("shape", [(2, 8, 6, 3), (1, 7, 9, 2)])
def test_max_pool_matches_reduce_window(shape):
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    ref_pool = lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    np.testing.assert_array_equal(_max_pool_2x2(x), ref_pool(x))
    w = jnp.asarray(rng.standard_normal(ref_pool(x).shape), jnp.float32)
    g = jax.grad(lambda x: jnp.sum(w * _max_pool_2x2(x)))(x)
    g_ref = jax.grad(lambda x: jnp.sum(w * ref_pool(x)))(x)
    np.testing.assert_array_equal(g, g_ref)  # no ties in random data: one winner per window


def test_pairs_per_step_only_changes_the_schedule():
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.random((3, 16, 24, 3)), jnp.float32)
    b = jnp.asarray(rng.random((3, 16, 24, 3)), jnp.float32)
    params = metrics.lpips_vgg_params()
    f = jax.jit(metrics.lpips_with_params, static_argnames="pairs_per_step")
    batched = np.asarray(f(params, a, b, pairs_per_step=3))
    for step in (1, 2):  # 2: one chunk of two plus a remainder of one
        np.testing.assert_allclose(np.asarray(f(params, a, b, pairs_per_step=step)), batched, atol=1e-6, rtol=0)
    g = jax.jit(jax.grad(lambda x, s: jnp.sum(metrics.lpips_with_params(params, x, b, pairs_per_step=s)),),
                static_argnums=1)
    np.testing.assert_allclose(np.asarray(g(a, 1)), np.asarray(g(a, 3)), atol=1e-7, rtol=1e-4)
    with pytest.raises(ValueError, match="pairs_per_step"):
        metrics.lpips_with_params(params, a, b, pairs_per_step=0)


@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_conv_matches_direct_conv(tile):
    rng = np.random.default_rng(3 + tile)
    x = jnp.asarray(rng.standard_normal((2, 9, 6, 5)), jnp.float32)  # 9 x 6: partial tiles for both sizes
    k = jnp.asarray(rng.standard_normal((3, 3, 5, 4)) / 4.0, jnp.float32)
    w = jnp.asarray(rng.standard_normal((2, 9, 6, 4)), jnp.float32)

    def winograd(x, k):
        return winograd_conv3x3_same(x, k, winograd_filter(k, tile), winograd_filter(flipped_kernel(k), tile),
                                     tile, HIGHEST)

    loss = lambda conv: (lambda x, k: jnp.sum(w * jnp.sin(conv(x, k))))
    ours = jax.jit(jax.value_and_grad(loss(winograd), argnums=(0, 1)))(x, k)
    ref = jax.value_and_grad(loss(_reference_conv), argnums=(0, 1))(x, k)
    np.testing.assert_allclose(winograd(x, k), _reference_conv(x, k), atol=2e-5 * tile, rtol=0)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-4)
    np.testing.assert_allclose(ours[1][0], ref[1][0], atol=2e-5 * tile, rtol=1e-4)  # input gradient
    np.testing.assert_allclose(ours[1][1], ref[1][1], atol=2e-5 * tile, rtol=1e-4)  # kernel gradient
    # vmap over a leading axis.
    np.testing.assert_allclose(jax.vmap(winograd, (0, None))(x[:, None], k)[:, 0], _reference_conv(x, k),
                               atol=2e-5 * tile, rtol=0)


def test_winograd_trunk_matches_xla_trunk_and_auto_choice():
    weights = load_lpips_vgg_numpy()
    convs = [(jnp.asarray(k), jnp.asarray(b)) for k, b in weights["convs"]]
    x = jnp.asarray(np.random.default_rng(6).standard_normal((1, 40, 36, 3)), jnp.float32)
    ours = jax.jit(lambda c, x: vgg16_taps(c, x, conv_impl="winograd"))(convs, x)
    ref = jax.jit(lambda c, x: vgg16_taps(c, x, conv_impl="xla"))(convs, x)
    for o, r in zip(ours, ref, strict=True):
        assert o.shape == r.shape
        np.testing.assert_allclose(o, r, atol=1e-5 * float(jnp.abs(r).max()), rtol=0)
    cpu = jax.default_backend() == "cpu"
    assert resolve_conv_impl("auto", (256, 256)) == ("winograd" if cpu else "xla")
    assert resolve_conv_impl("auto", (64, 64)) == "xla"
    with pytest.raises(ValueError, match="conv_impl"):
        resolve_conv_impl("fft")
