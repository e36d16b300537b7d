"""No int32 index space passes 2^31: S x V images whose flattened tile lists would (tokengs_4096:
64 scenes x 4 targets at 256x448) are composited in groups, lowered here abstractly; a pair count
N x tiles past 2^31 saturates instead of wrapping; what cannot be split is rejected by name."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.render import bin_gaussians, binning, rasterize_batch
from locojax.render.rasterize import image_group_size
from locojax.types import Camera, Gaussians


def abstract_scene(s, v, n):
    spec = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    g = Gaussians(means=spec(s, n, 3), quats=spec(s, n, 4), scales=spec(s, n, 3), opacities=spec(s, n),
                  sh=spec(s, n, 1, 3))
    return g, Camera(viewmat=spec(s, v, 4, 4), K=spec(s, v, 3, 3))


def test_past_2_31_entries_lowers_in_groups():
    # 262,144 Gaussians per scene (tokengs_4096's count) at 256x256: max_pairs 2,097,152 per image,
    # 4 sub-tiles -> 8,388,608 list entries per image; 2 x 150 images = 2.5e9 entries > 2^31.
    s, v, n = 2, 150, 262144
    entries = 4 * 2097152
    assert s * v * entries > 2**31
    group = image_group_size(s * v, n, entries)
    assert group * entries < 2**31 and (s * v) % group == 0 and group == 150
    g, cams = abstract_scene(s, v, n)

    def loss(g, cams):
        out = rasterize_batch(g, cams, width=256, height=256, sh_degree=0)
        return jnp.sum(out.rgb) + jnp.sum(out.depth), out.overflow

    lowered = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(g, cams)  # no allocation
    text = lowered.as_text()
    assert "tensor<2x150x8388608xi32>" in text  # the tile lists, as 2 groups of 150 images
    out = jax.eval_shape(loss, g, cams)
    assert out[1].shape == (s, v)


def test_group_size_and_rejection():
    assert image_group_size(256, 262144, 4 * 3670016) == 128  # tokengs_4096's global batch
    assert image_group_size(8, 393216, 4 * 2097152) == 8  # the benchmark's 393K x 8: one group
    assert image_group_size(7, 10, 2**30) == 1  # prime image count: groups of one
    with pytest.raises(ValueError, match="config.render.max_pairs"):
        image_group_size(4, 10, 2**31)
    with pytest.raises(ValueError, match="config.render.max_pairs"):
        jax.eval_shape(lambda g, c: rasterize_batch(g, c, width=64, height=64, sh_degree=0, max_pairs=2**30),
                       *abstract_scene(1, 1, 16))


def test_grouped_render_equals_one_group(monkeypatch):
    """Forcing groups (a lower index limit) changes nothing: same images, overflow and gradients."""
    rasterize_module = importlib.import_module("locojax.render.rasterize")  # the package exports a function of that name

    rng = np.random.default_rng(0)
    n, s, v = 40, 2, 3
    means = np.concatenate([rng.uniform(-1, 1, (s, n, 2)), rng.uniform(2, 4, (s, n, 1))], -1)
    g = Gaussians(means=jnp.asarray(means, jnp.float32), quats=jnp.asarray(rng.normal(size=(s, n, 4)), jnp.float32),
                  scales=jnp.full((s, n, 3), 0.1, jnp.float32),
                  opacities=jnp.asarray(rng.uniform(0.2, 0.9, (s, n)), jnp.float32),
                  sh=jnp.asarray(rng.normal(0, 0.5, (s, n, 1, 3)), jnp.float32))
    K = jnp.broadcast_to(jnp.array([[30.0, 0, 16], [0, 30, 12], [0, 0, 1]]), (s, v, 3, 3))
    view = jnp.broadcast_to(jnp.eye(4), (s, v, 4, 4)).at[:, :, 0, 3].set(jnp.arange(v) * 0.1)
    cams = Camera(viewmat=view, K=K)

    def run():
        def loss(g):
            out = rasterize_batch(g, cams, width=32, height=24, sh_degree=0, max_pairs=512)
            return jnp.sum(out.rgb * jnp.arange(1.0, 4.0)) + jnp.sum(out.alpha), out
        return jax.jit(jax.value_and_grad(loss, has_aux=True))(g)

    (_, ref), ref_grad = run()
    entries = 4 * 512
    monkeypatch.setattr(rasterize_module, "INDEX_LIMIT", 2 * entries + 1)  # groups of 2 images
    assert image_group_size(s * v, n, entries) == 2
    (_, got), got_grad = run()
    assert float(jnp.max(ref.alpha)) > 0.3
    for a, b in zip(jax.tree_util.tree_leaves((got, got_grad)), jax.tree_util.tree_leaves((ref, ref_grad))):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_saturating_pair_count_matches_exact(monkeypatch):
    """The N x tiles >= 2^31 path (saturating running count) bins exactly as the plain cumsum,
    including a pair buffer that overflows; forced here on a small case."""
    rng = np.random.default_rng(1)
    n = 300
    means2d = jnp.asarray(rng.uniform(0, 64, (n, 2)), jnp.float32)
    radii = jnp.asarray(rng.integers(0, 30, (n, 2)), jnp.int32)
    depths = jnp.asarray(rng.uniform(1, 5, n), jnp.float32)
    kw = dict(width=64, height=64, tile_size=16, max_pairs=700, tile_capacity=64, sub_size=8)
    binned = lambda: jax.jit(lambda *a: bin_gaussians(*a, **kw))(means2d, radii, depths)
    ref = binned()
    monkeypatch.setattr(binning, "SATURATE_ABOVE", 0)
    got = binned()
    assert int(ref.overflow) > 700  # far more pairs than the buffer holds
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(a, b)
