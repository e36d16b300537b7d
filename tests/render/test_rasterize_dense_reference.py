"""The dense reference's gradients against finite differences (float64), and the tiled fast path
against the dense reference (forward and gradients)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import jax.flatten_util

from locojax.render import rasterize, rasterize_dense
from locojax.types import Camera, Gaussians

try:  # pytest puts this directory on sys.path (no __init__.py here)
    from render_scenes import random_scene, to_jax
except ImportError:
    from tests.render.render_scenes import random_scene, to_jax

FIELDS = ("means", "quats", "scales", "opacities", "sh")


def enable_x64():
    """float64 in a context, across JAX versions (jax.experimental.enable_x64 was removed)."""
    try:
        from jax.experimental import enable_x64 as ctx

        return ctx()
    except ImportError:
        return jax.enable_x64(True)


def _loss(render, weights):
    def loss(g, bg):
        out = render(g, bg)
        return jnp.sum(out.rgb * weights[0]) + jnp.sum(out.depth * weights[1]) + jnp.sum(out.alpha * weights[2])
    return loss


def test_dense_gradients_match_finite_differences():
    width, height = 12, 10
    arrays, viewmat, K = random_scene(6, width=width, height=height, sh_degree=2, seed=11, scale=0.25,
                                      spread=0.5)
    rng = np.random.default_rng(0)
    with enable_x64():
        g = Gaussians(**{k: jnp.asarray(v, jnp.float64) for k, v in arrays.items()})
        cam = Camera(jnp.asarray(viewmat, jnp.float64), jnp.asarray(K, jnp.float64))
        weights = tuple(jnp.asarray(rng.normal(size=s)) for s in [(height, width, 3), (height, width, 1),
                                                                   (height, width, 1)])
        bg = jnp.asarray([0.3, 0.1, 0.7])
        render = lambda g, bg: rasterize_dense(g, cam, width=width, height=height, sh_degree=2, background=bg)
        loss = jax.jit(_loss(render, weights))
        assert float(render(g, bg).alpha.max()) > 0.3
        grads = jax.grad(loss, argnums=(0, 1))(g, bg)
        flat, unravel = jax.flatten_util.ravel_pytree((g, bg))
        gflat, _ = jax.flatten_util.ravel_pytree(grads)
        idx = rng.choice(flat.shape[0], 60, replace=False)
        eps = 1e-6
        for i in idx:
            e = jnp.zeros_like(flat).at[i].set(eps)
            fd = (loss(*unravel(flat + e)) - loss(*unravel(flat - e))) / (2 * eps)
            assert abs(float(fd) - float(gflat[i])) <= 1e-5 + 1e-4 * abs(float(fd)), (int(i), float(fd), float(gflat[i]))


@pytest.fixture(scope="module")
def fast_and_dense():
    width, height, sh = 50, 37, 1
    arrays, viewmat, K = random_scene(400, width=width, height=height, sh_degree=sh, seed=5, scale=0.1)
    g, cam = to_jax(arrays, viewmat, K)
    weights = tuple(jnp.asarray(np.random.default_rng(1).normal(size=s), jnp.float32)
                    for s in [(height, width, 3), (height, width, 1), (height, width, 1)])
    bg = jnp.asarray([0.9, 0.1, 0.4])
    kw = dict(width=width, height=height, sh_degree=sh)
    fast = lambda g, bg: rasterize(g, cam, background=bg, chunk=16, **kw)
    dense = lambda g, bg: rasterize_dense(g, cam, background=bg, **kw)
    results = []
    for render in (fast, dense):
        out = jax.jit(render)(g, bg)
        grads = jax.jit(jax.grad(_loss(render, weights), argnums=(0, 1)))(g, bg)
        results.append((out, grads))
    return results


def test_fast_forward_matches_dense(fast_and_dense):
    (fo, _), (do, _) = fast_and_dense
    assert int(fo.overflow) == 0 and float(do.alpha.mean()) > 0.3
    for key in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(fo, key), getattr(do, key), atol=1e-4, rtol=0, err_msg=key)


def test_fast_gradients_match_dense(fast_and_dense):
    (_, (fg, fbg)), (_, (dg, dbg)) = fast_and_dense
    for key in FIELDS:
        ref = np.asarray(getattr(dg, key))
        np.testing.assert_allclose(getattr(fg, key), ref, atol=2e-4 * np.abs(ref).max(), rtol=2e-3, err_msg=key)
    np.testing.assert_allclose(fbg, dbg, rtol=1e-4)
