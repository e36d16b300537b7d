"""Table 5's trilinear fine-level ablation (model.fine_level_interp="trilinear"): tent-kernel weights sum
to 1 per point; points on grid nodes reduce it to the box kernel (the per-voxel mean); a dense numpy
grid equals the static sort-based splat/query; one compilation across occupancies; overflow counted."""

import jax
import jax.numpy as jnp
import numpy as np

from locojax.models.locosplat.anchors import build_anchors
from locojax.models.locosplat.stage3d import LocalContext
from locojax.models.locosplat.voxels import cell_average, trilinear_cell_average, trilinear_corners

V = 0.001


def test_weights_are_the_tent_kernel_and_sum_to_one():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (50, 3)).astype(np.float32)
    keys, w, ov = trilinear_corners(jnp.asarray(x), 0.25)
    keys, w = np.asarray(keys), np.asarray(w)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    assert np.all(w >= 0) and int(ov) == 0
    tent = np.prod(np.clip(1 - np.abs(x[:, None, :].astype(np.float64) / 0.25 - keys), 0, None), -1)
    np.testing.assert_allclose(w, tent, atol=1e-5)
    assert len({tuple(k) for k in keys[0]}) == 8


def _dense_reference(x, f, q, cell):
    """Dense numpy grid over the cloud's bounding box: np.add.at of w and w f on the 8 nodes around
    each point, node mean sum w f / sum w, trilinear read renormalised over occupied nodes."""
    s = x.astype(np.float64) / cell
    lo = np.floor(np.concatenate([s, q / cell])).min(0).astype(int) - 1
    shape = tuple(np.floor(np.concatenate([s, q / cell])).max(0).astype(int) - lo + 3)
    wsum = np.zeros(shape)
    vsum = np.zeros(shape + (f.shape[1],))
    corners = [(i, j, k) for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    for p, val in zip(s, f):
        b = np.floor(p)
        for o in corners:
            w = np.prod(1 - np.abs(p - (b + o)))
            idx = tuple((b + o).astype(int) - lo)
            wsum[idx] += w
            vsum[idx] += w * val
    out = []
    for p in q.astype(np.float64) / cell:
        b = np.floor(p)
        num, den = 0.0, 0.0
        for o in corners:
            idx = tuple((b + o).astype(int) - lo)
            if wsum[idx] > 0:
                w = np.prod(1 - np.abs(p - (b + o)))
                num, den = num + w * vsum[idx] / wsum[idx], den + w
        out.append(num / den if den > 0 else np.zeros(f.shape[1]))
    return np.stack(out)


def test_sort_based_splat_and_query_equal_a_dense_numpy_grid():
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.4, 0.4, (60, 3)).astype(np.float32)
    f = rng.normal(size=(60, 5)).astype(np.float32)
    q = np.concatenate([x[::4] + rng.uniform(-0.05, 0.05, (15, 3)), rng.uniform(-0.5, 0.5, (10, 3)),
                        [[3.0, 3.0, 3.0]]]).astype(np.float32)  # the last one has no occupied node
    u, ov = jax.jit(lambda *a: trilinear_cell_average(*a, 0.1))(x, f, q)
    want = _dense_reference(x, f, q, 0.1)
    np.testing.assert_allclose(np.asarray(u), want, rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(u[-1]) == 0) and int(ov) == 0


def test_points_on_voxel_centres_equal_the_nearest_level():
    rng = np.random.default_rng(2)
    nodes = rng.integers(-20, 20, (30, 3))
    x = (nodes[rng.integers(0, 30, 200)] * 0.125).astype(np.float32)  # 0.125: x / cell exact in float32
    f = rng.normal(size=(200, 4)).astype(np.float32)
    u_tri, u_box = jax.jit(lambda x, f: (trilinear_cell_average(x, f, x, 0.125)[0], cell_average(x, f, x, 0.125)[0]))(x, f)
    np.testing.assert_array_equal(np.asarray(u_tri), np.asarray(u_box))

    # The whole fine level at v = 0.001 (x / v rounds within float32): trilinear == nearest f'.
    xs = (nodes[rng.integers(0, 30, 128)] * V).astype(np.float32)[None]
    fs = rng.normal(size=(1, 128, 6)).astype(np.float32)
    near, tri = (LocalContext((V, 0.128), 16, 32, fine_interp=m) for m in ("nearest", "trilinear"))
    a = jax.eval_shape(lambda x, f: build_anchors(x, f, V), xs, fs)
    params = jax.jit(near.init)(jax.random.PRNGKey(0), a, xs, fs)  # (only shapes of a are used)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
        jax.eval_shape(tri.init, jax.random.PRNGKey(0), a, xs, fs))  # the same parameters: W0 132 -> 16

    @jax.jit
    def run(x, f):
        a = build_anchors(x, f, V)
        return (near.apply(params, a, x, f)[0],) + tri.apply(params, a, x, f) + (a.num_anchors,)

    out_n, out_t, ov, num = run(xs, fs)
    live = int(num[0])  # dead rows (zero opacity downstream) read different zeros: not compared
    assert live < 128
    np.testing.assert_allclose(np.asarray(out_t)[0, :live], np.asarray(out_n)[0, :live], rtol=1e-4, atol=1e-5)
    assert int(ov[0]) == 0
    # off-centre points make the ablation differ from the per-voxel mean
    xj = xs + rng.uniform(-0.4, 0.4, xs.shape).astype(np.float32) * V
    out_n, out_t, _, _ = run(xj, fs)
    assert not np.allclose(np.asarray(out_t)[0, :live], np.asarray(out_n)[0, :live], atol=1e-4)


def test_one_compilation_across_occupancy_and_overflow_counted():
    rng = np.random.default_rng(3)
    n = 256
    sparse = rng.uniform(-0.5, 0.5, (n, 3)).astype(np.float32)
    dense = (rng.integers(0, 3, (n, 3)) * 0.01 + rng.uniform(0, 0.002, (n, 3))).astype(np.float32)
    f = rng.normal(size=(n, 4)).astype(np.float32)
    run = jax.jit(lambda *a: trilinear_cell_average(*a, 0.01))
    for x in (sparse, dense):
        u, ov = run(x, f, x)
        assert u.shape == (n, 4) and int(ov) == 0 and np.all(np.isfinite(np.asarray(u)))
    bad = sparse.copy()
    bad[0] = np.nan
    bad[1, 2] = 1e12
    u, ov = run(bad, f, sparse)
    assert int(ov) == 2 and np.all(np.isfinite(np.asarray(u)))
    assert run._cache_size() == 1
