"""LocusGS / TokenGS: exact parameter counts (abstract shapes), chunked == unchunked ray bias,
float32 anchors under bf16, tiny forward + loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.models.common.attention import multihead_attention
from locojax.models.locusgs import build
from locojax.models.locusgs.network import ray_bias
from locojax.types import Batch, Views


def _views(b, v, h, w, seed=0):
    rng = np.random.default_rng(seed)
    c2w = np.tile(np.eye(4, dtype=np.float32), (b, v, 1, 1))
    c2w[..., :3, 3] = rng.normal(size=(b, v, 3)) * 0.1
    K = np.tile(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (b, v, 1, 1))
    return Views(images=jnp.asarray(rng.uniform(size=(b, v, h, w, 3)), jnp.float32), intrinsics=jnp.asarray(K),
                 c2w=jnp.asarray(c2w), near=jnp.full((b, v), 0.01), far=jnp.full((b, v), 100.0),
                 index=jnp.zeros((b, v), jnp.int32))


def _count(name, unused=None):
    cfg = configs.get_config(name)
    if unused is not None:
        cfg.model.unused_params = unused
    model = build(cfg)
    ctx = _views(1, 1, 64, 64)
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), Batch(context=ctx, target=ctx, scene_id=jnp.zeros((1,), jnp.int32))))
    return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes))


@pytest.mark.parametrize("name,expected", [
    ("tokengs_1024", 218_871_040), ("tokengs_4096", 222_016_768),
    ("locusgs_1024", 238_356_764), ("locusgs_4096", 241_514_780)])
def test_parameter_counts_match_official(name, expected):
    assert _count(name) == expected


def test_locusgs_count_without_unused():
    assert _count("locusgs_1024", unused=False) == 238_356_764 - 52_236


def test_ray_bias_inside_chunked_attention_equals_unchunked():
    rng = np.random.default_rng(1)
    b, n, r, d, heads = 2, 24, 20, 16, 4
    mu = jnp.asarray(rng.normal(size=(b, n, 3)), jnp.float32)
    radius = jnp.asarray(rng.uniform(0.5, 2.0, size=(b, n)), jnp.float32)
    o = rng.normal(size=(b, r, 3)); dr = rng.normal(size=(b, r, 3))
    rays = jnp.asarray(np.concatenate([np.cross(o, dr), dr], -1), jnp.float32)
    bias = ray_bias(mu, radius, rays, sigma_ratio=0.1, sigma2_floor=1e-3, clamp=20.0)
    assert float(bias.min()) >= -20.0 and float(bias.max()) <= 0.0 and float(bias.min()) < -1.0
    q, k, v = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((b, n, d), (b, r, d), (b, r, d)))
    full = multihead_attention(q, k, v, heads, bias=0.1 * bias[:, None])
    chunked = multihead_attention(q, k, v, heads, bias=0.1 * bias[:, None], query_chunk=8)
    nobias = multihead_attention(q, k, v, heads)
    np.testing.assert_allclose(chunked, full, rtol=1e-5, atol=1e-6)
    assert float(jnp.max(jnp.abs(full - nobias))) > 1e-3  # the bias matters


@pytest.mark.parametrize("name", ["locusgs_tiny", "tokengs_tiny"])
def test_tiny_forward_and_loss(name):
    cfg = configs.get_config(name)
    cfg.precision = "bfloat16"
    model = build(cfg)
    ctx, tgt = _views(1, 2, 64, 64), _views(1, 2, 64, 64, seed=1)
    batch = Batch(context=ctx, target=tgt, scene_id=jnp.zeros((1,), jnp.int32))
    params = model.init(jax.random.PRNGKey(0), batch)
    if name.startswith("locusgs"):
        assert params["anchor_mu"].dtype == jnp.float32
    pred = model.predict(params, ctx, step=jnp.int32(0), train=True, rng=jax.random.PRNGKey(1))
    per_token = 64 if name.startswith("locusgs") else 16  # locusgs_tiny: the paper's 64 (configs/locusgs.py)
    assert pred.gaussians.means.shape == (1, 64 * per_token, 3)
    assert set(pred.extra) == ({"layer_2"} if name.startswith("locusgs") else set())
    if name.startswith("locusgs"):
        assert pred.aux["anchors_4"].dtype == jnp.float32
        radii = np.asarray(pred.aux["anchor_radii_4"])
        assert radii.shape == (1, 64) and radii.dtype == np.float32 and (radii >= 1e-3 / 2).all()
    assert np.isfinite(np.asarray(pred.gaussians.means)).all()


def test_centroid_dispersion_eq12():
    """C_centroid (eq. 12) against a direct numpy loop, and 0 when each token's Gaussians coincide."""
    from locojax.models.locusgs.model import centroid_dispersion

    rng = np.random.default_rng(0)
    means = rng.normal(size=(2, 5 * 3, 3)).astype(np.float32)
    want = [np.mean([np.linalg.norm(g - g.mean(0), axis=-1).mean() for g in m.reshape(5, 3, 3)]) for m in means]
    np.testing.assert_allclose(np.asarray(centroid_dispersion(jnp.asarray(means), 5)), want, rtol=1e-5)
    same = np.repeat(rng.normal(size=(1, 5, 1, 3)), 3, axis=2).reshape(1, 15, 3)
    np.testing.assert_allclose(np.asarray(centroid_dispersion(jnp.asarray(same), 5)), 0.0, atol=1e-6)


def test_head_xy_grid_places_initial_centres_on_a_lateral_grid():
    """model.head_xy_grid = s (tiny-budget departure): at init each token's G = 16 Gaussians sit on a
    4 x 4 grid over [-s, s]^2 in the network frame at z = 1 (TokenGS head); s = 0 is the official
    zero bias (every centre at (0, 0, 1))."""
    cfg = configs.get_config("tokengs_tiny")
    ctx = _views(1, 2, 64, 64)
    batch = Batch(context=ctx, target=ctx, scene_id=jnp.zeros((1,), jnp.int32))
    for spread in (0.0, 0.5):
        cfg.model.head_xy_grid = spread
        model = build(cfg)
        params = model.init(jax.random.PRNGKey(0), batch)
        _, frame, s = model.relative_cameras(ctx)
        world = np.asarray(model.predict(params, ctx).gaussians.means[0], np.float64)
        w2c = np.linalg.inv(np.asarray(frame[0], np.float64))
        local = ((world @ w2c[:3, :3].T + w2c[:3, 3]) * float(s[0])).reshape(64, 16, 3)  # network units
        want = np.zeros((16, 3), np.float32)
        want[:, 2] = 1.0
        if spread:
            ticks = (np.arange(4) + 0.5) / 4 * 2 * spread - spread
            want[:, 0], want[:, 1] = np.tile(ticks, 4), np.repeat(ticks, 4)
        np.testing.assert_allclose(local, np.broadcast_to(want, local.shape), atol=2e-3)
