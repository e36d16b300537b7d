"""LoCoSplat's static voxel anchors and two-grid local average (paper secs. 2.2-2.4, B.1) against numpy
group-bys: exact per-voxel means, the coarse grid, round half to even, the int32 key edge, one
compilation across scenes of different occupancy, inert dead rows, offsets within +-1.5 v."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.models.locosplat.anchors import build_anchors, unproject
from locojax.models.locosplat.decode import DEAD_POSITION, decode_gaussians
from locojax.models.locosplat.stage3d import LocalContext, PointwiseHead
from locojax.models.locosplat.voxels import KEY_LIMIT, cell_average, voxel_keys

V = 0.001


def _numpy_groupby(x, values, cell):
    """{key tuple: mean of values} with numpy's round half to even."""
    keys = np.round(x.astype(np.float64) / cell).astype(np.int64)
    out = {}
    for k, val in zip(map(tuple, keys), values):
        out.setdefault(k, []).append(val)
    return {k: np.mean(v, axis=0) for k, v in out.items()}, keys


def _scene(n, seed, clusters):
    """n points in `clusters` voxel-sized blobs (several points per voxel) plus scattered ones."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(-400, 400, size=(clusters, 3)) * V
    x = centres[rng.integers(0, clusters, n)] + rng.uniform(-0.3, 0.3, (n, 3)) * V
    x[: n // 4] = rng.uniform(-0.5, 0.5, (n // 4, 3))
    return x.astype(np.float32), rng.normal(size=(n, 6)).astype(np.float32)


def test_fine_level_is_the_exact_per_voxel_mean():
    x, f = _scene(512, 0, clusters=40)
    a = jax.jit(lambda x, f: build_anchors(x, f, V))(x[None], f[None])
    ref, _ = _numpy_groupby(x, np.concatenate([x, f], 1), V)
    num = int(a.num_anchors[0])
    assert num == len(ref) and num < 512 and int(a.count[0].sum()) == 512
    assert bool(jnp.all(a.live[0, :num])) and not bool(jnp.any(a.live[0, num:]))  # live rows first
    got = np.concatenate([np.asarray(a.positions[0, :num]), np.asarray(a.features[0, :num])], 1)
    want = np.stack([ref[k] for k in sorted(ref)])  # rows are in lexicographic key order
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(a.features[0, num:]) == 0)
    # Sec. 2.3: a nearest-cell splat of W0 f_i at cell v read at the anchor returns W0 f_a exactly.
    w0 = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    u, ov = cell_average(jnp.asarray(x), jnp.asarray(f @ w0), a.positions[0, :num], V)
    np.testing.assert_allclose(np.asarray(u), np.asarray(a.features[0, :num]) @ w0, rtol=1e-4, atol=1e-5)
    assert int(ov) == 0


def test_coarse_grid_equals_numpy_groupby_and_empty_cells_read_zero():
    x, f = _scene(400, 2, clusters=30)
    cell = 0.128
    queries = np.concatenate([x[::7], np.array([[5.0, 5.0, 5.0], [-3.0, 0.0, 1.0]], np.float32)])
    u, ov = jax.jit(lambda *a: cell_average(*a, cell))(x, f, queries)
    ref, _ = _numpy_groupby(x, f, cell)
    qkeys = map(tuple, np.round(queries.astype(np.float64) / cell).astype(np.int64))
    want = np.stack([ref.get(k, np.zeros(6)) for k in qkeys])
    np.testing.assert_allclose(np.asarray(u), want, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(u[-2:]) == 0) and int(ov) == 0


def test_round_half_to_even_and_int32_key_edge():
    x = np.array([[0.5, 1.5, 2.5], [-0.5, -1.5, -2.5]], np.float32)
    keys, ov = voxel_keys(jnp.asarray(x), 1.0)
    np.testing.assert_array_equal(np.asarray(keys), [[0, 2, 2], [0, -2, -2]])  # torch.round semantics
    # The last representable keys below the limit stay distinct and uncounted; beyond it, or not
    # finite, points are counted (and clamped into one sentinel cell), never silently wrapped.
    edge = float(KEY_LIMIT - 128)  # float32 spacing at 2^30 is 128
    x = np.array([[edge, 0, 0], [-edge, 0, 0], [edge - 128, 0, 0], [KEY_LIMIT, 0, 0], [0, 0, 1e12],
                  [np.nan, 0, 0], [0, -np.inf, 0]], np.float32)
    keys, ov = voxel_keys(jnp.asarray(x), 1.0)
    assert int(ov) == 4
    assert len({tuple(k) for k in np.asarray(keys[:3])}) == 3
    a = build_anchors(jnp.asarray(x[None]), jnp.ones((1, 7, 1)), 1.0)
    assert int(a.key_overflow[0]) == 4 and int(a.num_anchors[0]) == 4  # 3 + the sentinel cell


def test_24_views_of_a_scene_1e3_voxels_wide_group_exactly():
    """24 views x 8 x 8 pixels spread over 1,000 voxels per axis (and over 2e5, RE10K's 2 x far)."""
    rng = np.random.default_rng(3)
    for width in (1000, 200_000):
        k = rng.integers(0, width, size=(24 * 64, 3))
        k[::3] = k[1::3]  # shared voxels
        x = ((k + rng.uniform(-0.4, 0.4, k.shape)) * V).astype(np.float32)
        a = build_anchors(jnp.asarray(x[None]), jnp.asarray(x[None]), V)
        ref, keys = _numpy_groupby(x, x, V)
        assert int(a.num_anchors[0]) == len(ref) and int(a.key_overflow[0]) == 0
        want = np.stack([ref[key] for key in sorted(ref)])
        np.testing.assert_allclose(np.asarray(a.positions[0, : len(ref)]), want, rtol=1e-6, atol=1e-6)


def _pipeline(points, feats, params, stage, head):
    a = build_anchors(points, feats, V)
    fp, ov = stage.apply(params["stage"], a, points, feats)
    raw = head.apply(params["head"], fp)
    g, off = decode_gaussians(raw, a.positions, a.features[..., :3], a.live, voxel_size=V, sh_degree=2,
                              scale_min=1e-10, scale_max=3.0, offset_voxels=3.0)
    return g, off, a


def test_one_compilation_across_occupancy_dead_rows_inert_offsets_bounded():
    c = 10
    stage = LocalContext((V, 0.128), proj_dim=16, hidden=32)
    head = PointwiseHead(38, 38)
    n = 256
    x_sparse, f = _scene(n, 4, clusters=200)
    x_dense, _ = _scene(n, 5, clusters=5)  # many points per voxel
    f = np.concatenate([f, np.ones((n, c - 6), np.float32)], 1)
    a0 = build_anchors(jnp.asarray(x_sparse[None]), jnp.asarray(f[None]), V)
    params = {"stage": stage.init(jax.random.PRNGKey(0), a0, jnp.asarray(x_sparse[None]), jnp.asarray(f[None])),
              "head": head.init(jax.random.PRNGKey(1), jnp.zeros((1, n, c)))}
    # Large raw outputs: offsets saturate at +-1.5 v, never beyond.
    params["head"] = jax.tree_util.tree_map(lambda w: 50.0 * w, params["head"])
    run = jax.jit(_pipeline, static_argnums=(3, 4))
    occupancy = []
    for x in (x_sparse, x_dense):
        g, off, a = run(jnp.asarray(x[None]), jnp.asarray(f[None]), params, stage, head)
        num = int(a.num_anchors[0])
        occupancy.append(num)
        assert g.means.shape == (1, n, 3)
        assert np.all(np.asarray(g.opacities[0, num:]) == 0)
        assert np.all(np.asarray(g.means[0, num:]) == DEAD_POSITION)
        o = np.abs(np.asarray(off[0, :num]))
        assert o.max() <= 1.5 * V * (1 + 1e-5) and o.max() > 1.0 * V
        mu_minus_x = np.abs(np.asarray(g.means[0, :num] - a.positions[0, :num]))
        assert mu_minus_x.max() <= 1.5 * V * (1 + 1e-3)
        sh_dc = np.asarray(g.sh[0, :num, 0])
        np.testing.assert_allclose(sh_dc, (np.asarray(a.features[0, :num, :3]) - 0.5) / 0.28209479177387814,
                                   rtol=1e-5, atol=1e-5)
    assert occupancy[0] > 2 * occupancy[1]
    assert run._cache_size() == 1


def test_unproject_pixel_centres_opencv():
    depth = jnp.full((1, 1, 2, 2), 2.0)
    k = jnp.array([[[[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]]]])
    c2w = jnp.eye(4).at[:3, 3].set(jnp.array([1.0, 0, 0]))[None, None]
    p = np.asarray(unproject(depth, k, c2w))[0, 0]
    # pixel (0, 0) centre at (0.25, 0.25) normalised -> ray (-0.25, -0.25, 1) x depth 2, + t
    np.testing.assert_allclose(p[0, 0], [0.5, -0.5, 2.0], atol=1e-6)
    np.testing.assert_allclose(p[1, 1], [1.5, 0.5, 2.0], atol=1e-6)


@pytest.mark.long_running  # compiling the whole model's forward + backward: minutes on a shared 2-core CPU
def test_locosplat_tiny_step_lowers_the_loss():
    """The whole tiny model (trainable trunk, two depth scales, anchors, grids, head, the coarse-depth
    set through the toolkit's extra sets) at 32 px: a few Adam steps on one batch lower eq. 6's loss."""
    import optax

    import configs
    from locojax.models.interface import FINAL
    from locojax.models.locosplat import build
    from locojax.render.factory import make_render_fn, render_sets
    from locojax.types import Batch, Views

    cfg = configs.get_config("locosplat_tiny")
    cfg.data.image_shape = (32, 32)
    cfg.render.backend = "dense"
    model = build(cfg)
    rng = np.random.default_rng(0)
    b, v, h, w = 1, 2, 32, 32
    kk = np.broadcast_to(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (b, v, 3, 3))
    c2w = np.broadcast_to(np.eye(4, dtype=np.float32), (b, v, 4, 4)).copy()
    c2w[..., 0, 3] = np.arange(v) * 0.1
    img = np.repeat(np.repeat(rng.uniform(0, 1, (b, v, 4, 4, 3)), 8, 2), 8, 3).astype(np.float32)
    views = Views(images=jnp.asarray(img), intrinsics=jnp.asarray(kk), c2w=jnp.asarray(c2w),
                  near=jnp.full((b, v), 0.5), far=jnp.full((b, v), 100.0), index=jnp.zeros((b, v), jnp.int32))
    batch = Batch(context=views, target=views, scene_id=jnp.zeros((b,), jnp.int32))
    params = model.init(jax.random.PRNGKey(0), batch)
    render = make_render_fn(cfg.render, model.sh_degree)

    def loss_fn(p):
        pred = model.predict(p, batch.context, step=jnp.int32(0), train=True, rng=jax.random.PRNGKey(1))
        assert set(pred.extra) == {"coarse"} and pred.gaussians.means.shape == (b, v * h * w, 3)
        renders = render_sets(render, pred.render_sets(), batch.target)
        terms = model.loss_terms(p, batch, pred, renders, step=jnp.int32(0), rng=jax.random.PRNGKey(2))
        assert set(terms) == {"mse", "coarse_mse"} and float(terms["coarse_mse"].weight) == 0.9
        return sum(t.weight * t.value for t in terms.values()), renders[FINAL].rgb

    tx = optax.adam(1e-3)
    opt = tx.init(params)

    @jax.jit
    def step(p, o):
        (loss, _), g = jax.value_and_grad(loss_fn, has_aux=True)(p)
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o, loss

    losses = []
    for _ in range(4):
        params, opt, loss = step(params, opt)
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
