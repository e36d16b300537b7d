"""Edge cases of the tiled rasterizer, checked against the dense reference (itself checked against
gsplat in test_rasterize_vs_gsplat.py): culling, empty and tiny scenes, opaque stacks, capacity
overflow, non-finite input, batching, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.render import rasterize, rasterize_batch, rasterize_dense
from locojax.types import Camera, Gaussians

W, H = 32, 24
CAM = Camera(viewmat=jnp.eye(4), K=jnp.array([[30.0, 0, 16], [0, 30, 12], [0, 0, 1]]))
KW = dict(width=W, height=H, sh_degree=0)


def gaussians(means, scales=0.1, opacities=0.8, colors=None):
    means = jnp.asarray(means, jnp.float32).reshape(-1, 3)
    n = means.shape[0]
    sh = jnp.zeros((n, 1, 3)) if colors is None else jnp.asarray(colors, jnp.float32).reshape(n, 1, 3)
    return Gaussians(means=means, quats=jnp.tile(jnp.array([1.0, 0, 0, 0]), (n, 1)),
                     scales=jnp.broadcast_to(jnp.asarray(scales, jnp.float32), (n, 3)),
                     opacities=jnp.broadcast_to(jnp.asarray(opacities, jnp.float32), (n,)), sh=sh)


PAD_TO = 16  # every scene below is padded to this size so the jitted functions compile once


def pad(g):
    """Append invisible Gaussians (behind the camera) up to PAD_TO."""
    extra = PAD_TO - g.means.shape[0]
    filler = gaussians(np.tile([[0.0, 0.0, -1.0]], (extra, 1)))
    return Gaussians.concatenate([g, filler])


_fast_jit = jax.jit(lambda g, bg: rasterize(g, CAM, background=bg, **KW))
_dense_jit = jax.jit(lambda g, bg: rasterize_dense(g, CAM, background=bg, **KW))
_grad_jit = jax.jit(jax.grad(lambda g, bg: jnp.sum(rasterize(g, CAM, background=bg, **KW).rgb * jnp.arange(3.0))))
_fast = lambda g, bg: _fast_jit(pad(g), bg)
_dense = lambda g, bg: _dense_jit(pad(g), bg)
_grad = lambda g, bg: jax.tree_util.tree_map(lambda x: x[: g.means.shape[0]], _grad_jit(pad(g), bg))
BG = jnp.array([0.1, 0.2, 0.3])


def assert_same(out, ref, atol=1e-4):
    for key in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(out, key), getattr(ref, key), atol=atol, err_msg=key)


def test_culled_gaussians_leave_background():
    g = gaussians([[0, 0, -2.0],      # behind the camera
                   [0, 0, 0.005],     # nearer than near=0.01
                   [50.0, 0, 2.0],    # far off-screen
                   [0, 40.0, 1.0]])   # off-screen below
    out = _fast(g, BG)
    np.testing.assert_allclose(out.rgb, jnp.broadcast_to(BG, (H, W, 3)), atol=1e-7)
    assert float(out.alpha.max()) == 0.0 and float(jnp.abs(out.depth).max()) == 0.0
    grads = _grad(g, BG)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(grads))


def test_offscreen_centre_reaching_into_image_is_drawn():
    g = gaussians([[-0.62, 0, 1.0]], scales=0.08, opacities=0.9)  # centre 2.6 px left of the image
    out, ref = _fast(g, BG), _dense(g, BG)
    assert float(ref.alpha.max()) > 0.05
    assert_same(out, ref)


def test_huge_and_degenerate_gaussians():
    g = gaussians([[0, 0, 2.0], [0.1, 0.1, 3.0], [0.2, -0.1, 4.0], [0.3, 0, 5.0]],
                  scales=jnp.array([[30.0, 30, 30], [0, 0, 0], [1e-9, 0.2, 0.2], [0.1, 0.1, 0.1]]),
                  opacities=0.5, colors=np.linspace(-1, 1, 12))
    g = g.replace(quats=g.quats.at[3].set(0.0))  # zero quaternion: normalised like torch (identity)
    out, ref = _fast(g, BG), _dense(g, BG)
    assert_same(out, ref)
    grads = _grad(g, BG)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(grads))


def test_zero_and_one_gaussian():
    empty = gaussians(np.zeros((0, 3)))
    out = rasterize(empty, CAM, background=BG, **KW)  # not padded: N = 0 itself
    assert out.rgb.shape == (H, W, 3) and out.depth.shape == (H, W, 1) and out.alpha.shape == (H, W, 1)
    np.testing.assert_allclose(out.rgb, jnp.broadcast_to(BG, (H, W, 3)))
    assert int(out.overflow) == 0 and int(out.num_invalid) == 0
    one = gaussians([[0.05, -0.02, 1.5]], scales=0.1, opacities=0.7, colors=[0.3, -0.2, 0.1])
    out, ref = _fast(one, BG), _dense(one, BG)
    assert float(ref.alpha.max()) > 0.5
    assert_same(out, ref)


def test_opaque_stack_stops_at_transmittance_cutoff():
    # Opaque layers (alpha clamped to 0.999): after the first T = 1e-3; the second would take it to
    # 1e-6 <= 1e-4, so it and everything behind it are excluded.
    z = np.linspace(1.0, 2.0, 6)
    g = gaussians(np.stack([np.zeros(6), np.zeros(6), z], -1), scales=2.0, opacities=1.0,
                  colors=np.eye(3)[np.arange(6) % 3] * 2 - 0.5)
    out, ref = _fast(g, BG), _dense(g, BG)
    assert_same(out, ref)
    centre = np.asarray(out.rgb[H // 2, W // 2])
    colour0 = 0.2820947917738781 * (np.array([1.0, 0, 0]) * 2 - 0.5) + 0.5  # SH degree 0
    np.testing.assert_allclose(centre, 0.999 * colour0 + 1e-3 * np.asarray(BG), atol=1e-5)
    np.testing.assert_allclose(out.alpha[H // 2, W // 2], [0.999], atol=1e-6)


def test_overflow_is_counted_and_nearest_are_kept():
    rng = np.random.default_rng(0)
    n = 40
    means = np.stack([rng.uniform(-0.1, 0.1, n), rng.uniform(-0.1, 0.1, n), rng.uniform(2, 4, n)], -1)
    g = gaussians(means, scales=0.05, opacities=0.3, colors=rng.normal(0, 0.5, (n, 3)))
    cam = Camera(viewmat=jnp.eye(4), K=jnp.array([[30.0, 0, 8], [0, 30, 8], [0, 0, 1]]))
    kw = dict(width=16, height=16, sh_degree=0, background=BG)  # one tile
    full = jax.jit(lambda g: rasterize(g, cam, **kw))(g)
    assert int(full.overflow) == 0
    nearest = np.argsort(means[:, 2])[:10]
    ref = rasterize_dense(jax.tree_util.tree_map(lambda x: x[nearest], g), cam, **kw)
    for caps in (dict(tile_capacity=10), dict(max_pairs=10)):
        out = jax.jit(lambda g: rasterize(g, cam, **caps, **kw))(g)
        assert int(out.overflow) == n - 10, caps
        assert_same(out, ref)


def test_non_finite_gaussians_are_dropped_and_counted():
    rng = np.random.default_rng(1)
    n = 12
    means = np.stack([rng.uniform(-0.3, 0.3, n), rng.uniform(-0.2, 0.2, n), rng.uniform(1.5, 3, n)], -1)
    g = gaussians(means, scales=0.08, opacities=0.6, colors=rng.normal(0, 0.5, (n, 3)))
    bad = g.replace(means=g.means.at[0, 1].set(jnp.nan), scales=g.scales.at[3, 0].set(jnp.inf),
                    sh=g.sh.at[5, 0, 2].set(jnp.nan), opacities=g.opacities.at[7].set(jnp.nan))
    keep = np.setdiff1d(np.arange(n), [0, 3, 5, 7])
    out = _fast(bad, BG)
    ref = _dense(jax.tree_util.tree_map(lambda x: x[keep], g), BG)
    assert int(out.num_invalid) == 4
    assert_same(out, ref)
    grads = _grad(bad, BG)
    for x in jax.tree_util.tree_leaves(grads):
        assert bool(jnp.all(jnp.isfinite(x)))
    assert float(jnp.abs(grads.means[0]).max()) == 0.0


def test_batch_and_vmap_match_single_renders():
    rng = np.random.default_rng(2)
    s, v, n = 2, 3, 30

    def scene(i):
        means = np.stack([rng.uniform(-0.4, 0.4, n), rng.uniform(-0.3, 0.3, n), rng.uniform(1.5, 3, n)], -1)
        return gaussians(means, scales=0.07, opacities=0.7, colors=rng.normal(0, 0.5, (n, 3)))

    scenes = [scene(i) for i in range(s)]
    g = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *scenes)
    shifts = jnp.asarray(rng.normal(0, 0.05, (s, v, 3)), jnp.float32)
    viewmat = jnp.tile(jnp.eye(4), (s, v, 1, 1)).at[..., :3, 3].set(shifts)
    cams = Camera(viewmat=viewmat, K=jnp.broadcast_to(CAM.K, (s, v, 3, 3)))
    batch = jax.jit(lambda g, c: rasterize_batch(g, c, background=BG, **KW))(g, cams)
    assert batch.rgb.shape == (s, v, H, W, 3) and batch.overflow.shape == (s, v)
    vmapped = jax.jit(jax.vmap(jax.vmap(lambda g, c: rasterize(g, c, background=BG, **KW), (None, 0))))(g, cams)
    dense = jax.jit(lambda g, c: rasterize_dense(g, c, background=BG, **KW))
    for i in range(s):
        for j in range(v):
            ref = dense(scenes[i], Camera(viewmat=viewmat[i, j], K=CAM.K))
            assert_same(jax.tree_util.tree_map(lambda x: x[i, j], batch), ref)
            assert_same(jax.tree_util.tree_map(lambda x: x[i, j], vmapped), ref)


def test_bad_input_names_the_argument():
    g = gaussians([[0, 0, 2.0], [0, 0, 3.0]])
    with pytest.raises(ValueError, match="gaussians.quats.*\\[N=2, 4\\]"):
        rasterize(g.replace(quats=g.quats[:, :3]), CAM, **KW)
    with pytest.raises(ValueError, match="gaussians.opacities"):
        rasterize(g.replace(opacities=g.opacities[:, None]), CAM, **KW)
    with pytest.raises(TypeError, match="gaussians.means.*float"):
        rasterize(g.replace(means=g.means.astype(jnp.int32)), CAM, **KW)
    with pytest.raises(ValueError, match="camera.K.*\\[3, 3\\]"):
        rasterize(g, Camera(viewmat=CAM.viewmat, K=CAM.K[:2]), **KW)
    with pytest.raises(ValueError, match="gaussians.sh.*sh_degree=2"):
        rasterize(g, CAM, width=W, height=H, sh_degree=2)
    with pytest.raises(ValueError, match="background.*\\[3\\]"):
        rasterize(g, CAM, background=jnp.zeros(4), **KW)
    with pytest.raises(ValueError, match="cameras.viewmat.*\\[S, V, 4, 4\\]"):
        rasterize_batch(jax.tree_util.tree_map(lambda x: x[None], g), CAM, **KW)


def test_stable_depth_argsort_matches_numpy():
    # The binning's radix argsort (single-operand int32 sorts) must equal a stable argsort,
    # including ties (equal depths keep index order), -0.0 == 0.0 and infinities.
    from locojax.render.binning import argsort_stable

    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 3000):
        x = rng.choice(np.array([-2.5, -0.0, 0.0, 1.0, 1.0 + 1e-7, 3.0, np.inf, -np.inf], np.float32), n)
        x[: n // 2] = rng.uniform(-4, 4, n // 2).astype(np.float32)
        got = np.asarray(jax.jit(argsort_stable)(jnp.asarray(x)))
        np.testing.assert_array_equal(got, np.argsort(x, kind="stable"), err_msg=f"n={n}")


def test_subtile_lists_match_whole_tiles():
    # Compositing 8x8 (default) or 4x4 sub-tile lists must give the image of compositing the whole
    # 16x16 tiles' lists (the split only removes entries that cannot reach a sub-tile's pixels).
    rng = np.random.default_rng(6)
    n = PAD_TO
    means = np.stack([rng.uniform(-0.5, 0.5, n), rng.uniform(-0.4, 0.4, n), rng.uniform(1.5, 3, n)], -1)
    g = gaussians(means, scales=rng.uniform(0.02, 0.12, (n, 1)).repeat(3, 1), opacities=rng.uniform(0.2, 1.0, n),
                  colors=rng.normal(0, 0.5, (n, 3)))
    outs = [jax.jit(lambda g: rasterize(g, CAM, background=BG, subtile_size=s, **KW))(g) for s in (16, 8, 4)]
    assert float(outs[0].alpha.max()) > 0.5
    for out in outs[1:]:
        assert_same(out, outs[0], atol=1e-6)
        assert int(out.overflow) == int(outs[0].overflow) == 0


def test_empty_tile_before_a_drawn_tile():
    # Tile 1 (top right) is empty and follows tile 0: its sub-tile counts once went negative, which
    # shifted every later sub-tile list (found by the GlobalSplat side-by-side run at initialisation,
    # where the Gaussians are a blob covering a few tiles).
    g = gaussians([[-0.33, -0.2, 1.0], [-0.33, 0.27, 1.0], [-0.2, 0.3, 1.0]], scales=0.04, opacities=0.9,
                  colors=[[0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
    out, ref = _fast(g, BG), _dense(g, BG)
    assert float(ref.alpha[18:, :16].max()) > 0.5 and float(ref.alpha[:16, 16:].max()) == 0.0
    assert_same(out, ref)
