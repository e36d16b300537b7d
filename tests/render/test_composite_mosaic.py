"""Mosaic TPU compositing kernels (`composite_tiles_mosaic`) on CPU: numerics in Pallas interpret mode
against the XLA `composite_tiles` (itself checked against gsplat in test_rasterize_vs_gsplat.py), the
chunk layout against a plain loop, and lowering for TPU with `jax.export` (lowering only: nothing
here compiles for or runs on a TPU)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from locojax.render.binning import bin_gaussians, tile_grid
from locojax.render.composite import composite_tiles
from locojax.render.pallas import mosaic_composite
from locojax.render.pallas.mosaic_composite import composite_tiles_mosaic
from locojax.render.pallas.mosaic_layout import chunk_layout
from locojax.render.projection import project_gaussians

try:  # pytest puts this directory on sys.path (no __init__.py here)
    from render_scenes import random_scene, to_jax
except ImportError:
    from tests.render.render_scenes import random_scene, to_jax

W, H, TILE, SUB, CHUNK = 40, 24, 16, 8, 16  # 3 x 2 tiles, the right column half outside the image
N = 1200  # dense enough that sub-tile lists run past one 128-entry kernel chunk
MAX_LIST = 512  # list length of the float64 reference


def composite_inputs(n, seed, scale):
    """(table, ids, starts, limits, origins) of one image, built as `rasterize` builds them."""
    return _binned(*to_jax(*random_scene(n, width=W, height=H, sh_degree=1, seed=seed, scale=scale)))


@jax.jit
def _binned(g, cam):
    n = g.means.shape[0]
    p = project_gaussians(g, cam, width=W, height=H, sh_degree=1)
    bins = bin_gaussians(p.means2d, p.radii, p.depths, p.conics, p.opacities, width=W, height=H,
                         tile_size=TILE, max_pairs=16384, tile_capacity=4096, sub_size=SUB)
    table = jnp.concatenate([p.means2d, p.conics, p.opacities[:, None], p.colors, p.depths[:, None]], -1)
    table = jnp.where(jnp.all(p.radii > 0, -1)[:, None], table, 0.0)
    table = jnp.concatenate([table, jnp.zeros((1, 10))], 0)  # sentinel row N
    ids = jnp.where(bins.ids >= n, n, bins.ids)
    tiles_x, tiles_y = tile_grid(W, H, TILE)
    s = TILE // SUB
    t = jnp.arange(tiles_x * tiles_y)[:, None]
    jy, jx = jnp.divmod(jnp.arange(s * s)[None], s)
    origins = jnp.stack([(t % tiles_x) * TILE + jx * SUB, (t // tiles_x) * TILE + jy * SUB], -1)
    return table, ids, bins.starts, bins.counts, origins.reshape(-1, 2).astype(jnp.int32)


def inside_mask(origins):
    ly, lx = np.divmod(np.arange(SUB * SUB), SUB)
    o = np.asarray(origins)
    return ((o[:, None, 0] + lx) < W) & ((o[:, None, 1] + ly) < H)


@functools.partial(jax.jit, static_argnums=0)
def _both(impl, table, ids, starts, limits, origins, g_rgbz, g_t):
    """Outputs and table gradient of the loss <outputs, cotangents> for one implementation."""
    f = lambda tab: impl(tab, ids, starts, limits, origins, SUB, W, H, CHUNK)
    out, vjp = jax.vjp(f, table)
    return out, vjp((g_rgbz, g_t))[0]


_xla = composite_tiles
_mosaic = functools.partial(composite_tiles_mosaic, interpret=True)


@pytest.fixture(scope="module")
def base():
    return composite_inputs(N, seed=3, scale=0.2)


def _cases(base):
    table, ids, starts, limits, origins = base
    rows = np.arange(starts.shape[0])
    n = table.shape[0] - 1
    sentinel_ids = jnp.where(jnp.arange(ids.shape[0]) % 7 == 3, n, ids)  # sentinel padding inside lists
    return {
        "binned": base,
        "capped lists": (table, ids, starts, jnp.minimum(limits, 50), origins),
        "0.999 clamp and saturation": (table.at[:-1, 5].set(jnp.where(table[:-1, 5] > 0, 1.0, 0.0)), ids,
                                       starts, limits, origins),
        "empty rows and sentinels": (table, sentinel_ids, starts, jnp.where(rows % 3 == 1, 0, limits), origins),
    }


def blend_float64(table, ids, starts, limits, origins, g_rgbz, g_t):
    """Independent float64 reference: every row's whole list blended at once (cumprod), gradient by
    autodiff. Returns ((rgbz [4, R, P], t_final [R, P]), table gradient) as numpy float64."""
    table, ids, starts, limits, origins = map(np.asarray, (table, ids, starts, limits, origins))
    assert int(limits.max()) <= MAX_LIST
    j = np.arange(MAX_LIST)  # one compile for every case
    pos = np.minimum(starts[:, None] + j, ids.shape[0] - 1)
    lists = np.where(j < limits[:, None], ids[pos], table.shape[0] - 1)  # [R, L]
    ly, lx = np.divmod(np.arange(SUB * SUB), SUB)
    px, py = origins[:, None, 0] + lx + 0.5, origins[:, None, 1] + ly + 0.5  # pixel centres [R, P]

    with jax.enable_x64(True):
        (_, out), grad = _value_and_grad_64(jnp.asarray(table, jnp.float64), lists, px, py, g_rgbz, g_t)
        return tuple(map(np.asarray, out)), np.asarray(grad)


def _blend_loss_64(tab, lists, px, py, g_rgbz, g_t):
    """<(rgbz, t_final), cotangents> of lists [R, L] at pixel centres px, py [R, P]."""
    a = tab[lists]  # [R, L, 10]
    dx, dy = a[..., 0, None] - px[:, None], a[..., 1, None] - py[:, None]
    sigma = 0.5 * (a[..., 2, None] * dx * dx + a[..., 4, None] * dy * dy) + a[..., 3, None] * dx * dy
    alpha = jnp.minimum(0.999, a[..., 5, None] * jnp.exp(-sigma))
    valid = (sigma >= 0) & (alpha >= 1 / 255)
    one_minus = jnp.where(valid, 1 - alpha, 1.0)
    t_incl = jnp.cumprod(one_minus, axis=1)
    used = valid & (t_incl > 1e-4)
    w = jnp.where(used, alpha * t_incl / one_minus, 0.0)
    rgbz = jnp.einsum("rlp,rlc->crp", w, a[..., 6:10])
    t_final = jnp.prod(jnp.where(used, one_minus, 1.0), axis=1)
    return jnp.sum(rgbz * g_rgbz) + jnp.sum(t_final * g_t), (rgbz, t_final)


_value_and_grad_64 = jax.jit(jax.value_and_grad(_blend_loss_64, has_aux=True))


@pytest.mark.parametrize("case", ["binned", "capped lists", "0.999 clamp and saturation",
                                  "empty rows and sentinels"])
def test_mosaic_matches_xla_composite_and_float64(base, case):
    table, ids, starts, limits, origins = _cases(base)[case]
    inside = inside_mask(origins)
    rng = np.random.default_rng(0)
    # Cotangents on in-image pixels only: off-image pixels are cropped by `rasterize`, and their
    # values depend on where each implementation's early exit stops.
    g_rgbz = rng.normal(size=(4,) + inside.shape) * inside
    g_t = rng.normal(size=inside.shape) * inside
    cts = (jnp.asarray(g_rgbz, jnp.float32), jnp.asarray(g_t, jnp.float32))
    (rgbz_x, t_x), grad_x = _both(_xla, table, ids, starts, limits, origins, *cts)
    (rgbz_m, t_m), grad_m = _both(_mosaic, table, ids, starts, limits, origins, *cts)
    (rgbz_64, t_64), grad_64 = blend_float64(table, ids, starts, limits, origins, g_rgbz, g_t)
    assert rgbz_m.shape == rgbz_x.shape and t_m.shape == t_x.shape and grad_m.shape == table.shape
    for ref in (rgbz_x, rgbz_64):
        np.testing.assert_allclose(np.asarray(rgbz_m)[:, inside], np.asarray(ref)[:, inside], atol=1e-5)
    for ref in (t_x, t_64):
        np.testing.assert_allclose(np.asarray(t_m)[inside], np.asarray(ref)[inside], atol=1e-6)
    scale = np.abs(grad_64).max(0)
    assert np.all(scale[[0, 1, 2, 5, 6, 9]] > 0), "a gradient column is identically zero: case tests nothing"
    # Per attribute column, relative to its largest entry. float32 rounding alone, measured against
    # float64: the XLA path is off by up to 5e-5 (opacity, behind 0.999-clamped alphas, where the
    # backward divides by 1 - alpha = 1e-3), the kernels by up to 3e-5 on these cases.
    for name, ref in (("xla", grad_x), ("float64", grad_64)):
        err = np.abs(np.asarray(grad_m) - ref).max(0)
        assert np.all(err <= 1e-4 * scale), (case, name, err / scale)


@pytest.mark.long_running
def test_tpu_interpreter_finds_no_races_and_no_uninitialised_reads(base, monkeypatch):
    """The TPU interpreter (`pltpu.InterpretParams`) simulates the DMAs and semaphores, runs the
    "parallel" grid on two simulated cores with race detection, raises on out-of-bounds reads and
    fills never-written memory with NaN: the saturating case covers the early stop with a prefetch
    in flight and the zero-filled chunks of the backward; rows split over two kernel calls cover the
    backward's partials threaded through `input_output_aliases`."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call

    monkeypatch.setattr(mosaic_composite, "ROWS_PER_CALL", 4)  # 6 rows: two calls each way
    table, ids, starts, limits, origins = _cases(base)["0.999 clamp and saturation"]
    # Two tiles (the second half outside the image) with their lists packed into a short `ids`: the
    # interpreter's time grows with the size of the HBM buffers it simulates.
    rows = np.array([0, 1, 2, 3, 8, 9])
    starts, limits, origins = np.asarray(starts)[rows], np.asarray(limits)[rows], origins[rows]
    ids = jnp.asarray(np.concatenate([np.asarray(ids)[a: a + n] for a, n in zip(starts, limits)]))
    starts = jnp.asarray(np.cumsum(limits) - limits, jnp.int32)
    limits = jnp.asarray(limits)
    inside = inside_mask(origins)
    rng = np.random.default_rng(1)
    cts = (jnp.asarray(rng.normal(size=(4,) + inside.shape) * inside, jnp.float32),
           jnp.asarray(rng.normal(size=inside.shape) * inside, jnp.float32))
    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, out_of_bounds_reads="raise",
                                   uninitialized_memory="nan")
    f = lambda tab: composite_tiles_mosaic(tab, ids, starts, limits, origins, SUB, W, H, CHUNK, interpret=params)
    (rgbz, t_final), vjp = jax.vjp(f, table)
    jax.block_until_ready(rgbz)
    assert not interpret_pallas_call.races.races_found, "forward kernel"
    grad = jax.block_until_ready(vjp(cts)[0])
    assert not interpret_pallas_call.races.races_found, "backward kernel"
    (rgbz_x, t_x), grad_x = _both(_xla, table, ids, starts, limits, origins, *cts)
    np.testing.assert_allclose(np.asarray(rgbz)[:, inside], np.asarray(rgbz_x)[:, inside], atol=1e-5)
    np.testing.assert_allclose(np.asarray(t_final)[inside], np.asarray(t_x)[inside], atol=1e-6)
    scale = np.abs(np.asarray(grad_x)).max(0)
    assert np.all(np.abs(np.asarray(grad) - np.asarray(grad_x)).max(0) <= 1e-4 * scale)


def test_cases_reach_the_paths_they_name(base):
    cases = _cases(base)
    table, ids, starts, limits, origins = cases["binned"]
    assert int(limits.max()) > 128, "no list spans two kernel chunks"
    assert int(limits.min()) > 0
    (_, t_sat), _ = _both(_xla, *cases["0.999 clamp and saturation"], *_zero_cts(origins))
    assert float(t_sat[inside_mask(origins)].min()) <= 1e-3  # saturated pixels: the early exit runs
    assert int(jnp.sum(cases["capped lists"][3])) < int(jnp.sum(limits))
    assert int(jnp.sum(cases["empty rows and sentinels"][3] == 0)) >= 3


def _zero_cts(origins):
    r = origins.shape[0]
    return jnp.zeros((4, r, SUB * SUB)), jnp.zeros((r, SUB * SUB))


def test_chunk_layout_matches_a_loop():
    rng = np.random.default_rng(5)
    limits = np.array([0, 3, 130, 0, 0, 128, 1, 257, 0], np.int32)
    gaps = rng.integers(0, 4, limits.size)
    starts = np.cumsum(np.concatenate([[0], (limits + gaps)[:-1]])).astype(np.int32)
    m = int(starts[-1] + limits[-1] + 5)
    ids = rng.integers(0, 50, m).astype(np.int32)
    lay = chunk_layout(jnp.asarray(ids), jnp.asarray(starts), jnp.asarray(limits), 50, 128)
    src, valid = np.asarray(lay.src).reshape(-1, 128), np.asarray(lay.valid).reshape(-1, 128)
    expect_chunks = -(-limits // 128)
    np.testing.assert_array_equal(lay.num_chunks, expect_chunks)
    np.testing.assert_array_equal(lay.chunk_start, np.cumsum(expect_chunks) - expect_chunks)
    for r in range(limits.size):
        got = src[lay.chunk_start[r]: lay.chunk_start[r] + expect_chunks[r]].reshape(-1)
        np.testing.assert_array_equal(got[: limits[r]], ids[starts[r]: starts[r] + limits[r]])
        assert np.all(got[limits[r]:] == 50)
        assert valid[lay.chunk_start[r]: lay.chunk_start[r] + expect_chunks[r]].sum() == limits[r]
    assert valid.sum() == limits.sum() and np.all(src[~valid] == 50)


def test_mosaic_lowers_for_tpu():
    """`jax.export` for ("tpu",) of the forward and of value_and_grad on this CPU host: Pallas lowers
    both kernels to Mosaic (block-shape and indexing rules included); Mosaic's own compile runs only
    on a TPU."""
    # The largest rasterizer case: 393,216 Gaussians x 8 views at 256 x 256, default
    # capacities (2M pairs per image, 4 sub-tile lists each): 32768 rows, so two calls each way.
    views = 8
    n, m, r = 393216 * views, views * 4 * 2 * 256 * 4096, views * 4096
    spec = lambda shape, dtype=jnp.float32: jax.ShapeDtypeStruct(shape, dtype)
    args = (spec((n + 1, 10)), spec((m,), jnp.int32), spec((r,), jnp.int32), spec((r,), jnp.int32),
            spec((r, 2), jnp.int32))
    f = lambda *a: composite_tiles_mosaic(*a, SUB, 256, 256, CHUNK)
    loss = lambda table, *rest: sum(jnp.sum(x) for x in f(table, *rest))
    fwd = jax.export.export(jax.jit(f), platforms=("tpu",))(*args)
    vg = jax.export.export(jax.jit(jax.value_and_grad(loss)), platforms=("tpu",))(*args)
    assert fwd.platforms == ("tpu",) and vg.platforms == ("tpu",)
    calls = -(-r // mosaic_composite.ROWS_PER_CALL)
    assert calls == 2
    assert fwd.mlir_module().count("tpu_custom_call") == calls
    assert vg.mlir_module().count("tpu_custom_call") == 2 * calls  # forward and backward kernels


def test_rasterize_through_the_mosaic_kernels(monkeypatch):
    """`rasterize_batch` with its compositing routed to the interpreted Mosaic kernels (what the tpu
    branch of the dispatcher runs) against the XLA path: images, overflow and non-finite counts and
    the gradients w.r.t. every Gaussian parameter, with capped tiles and non-finite Gaussians."""
    import importlib

    from locojax.render import rasterize_batch

    def mosaic(table, ids, starts, limits, origins, tile_size, width, height, chunk, backend, max_count=None):
        return composite_tiles_mosaic(table, ids, starts, limits, origins, tile_size, width, height, chunk,
                                      interpret=True)

    arrays, viewmat, K = random_scene(96, width=W, height=H, sh_degree=0, seed=7, scale=0.25)
    g, cam = to_jax(arrays, viewmat, K)
    g = g.replace(means=g.means.at[3, 0].set(jnp.nan), scales=g.scales.at[5, 1].set(jnp.inf),
                  opacities=g.opacities.at[8].set(jnp.nan))
    g = jax.tree_util.tree_map(lambda x: x[None], g)
    cams = jax.tree_util.tree_map(lambda x: x[None, None], cam)
    kw = dict(width=W, height=H, sh_degree=0, background=jnp.array([0.1, 0.2, 0.3]), tile_capacity=40)

    def run(gs):
        def loss(gs):
            out = rasterize_batch(gs, cams, backend="xla", **kw)
            return jnp.sum(out.rgb * jnp.arange(1.0, 4.0)) + 0.1 * jnp.sum(out.depth) + 0.5 * jnp.sum(out.alpha), out
        (_, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(gs)
        return out, grads

    ref, ref_grads = run(g)
    # The package re-exports the function `rasterize`, hiding the module of the same name.
    monkeypatch.setattr(importlib.import_module("locojax.render.rasterize"), "composite", mosaic)
    out, grads = run(g)
    assert int(ref.overflow.sum()) > 0 and int(ref.num_invalid.sum()) == 3
    np.testing.assert_array_equal(out.overflow, ref.overflow)
    np.testing.assert_array_equal(out.num_invalid, ref.num_invalid)
    for key, atol in (("rgb", 2e-6), ("alpha", 2e-6), ("depth", 1e-5)):
        np.testing.assert_allclose(getattr(out, key), getattr(ref, key), atol=atol, err_msg=key)
    for name in ("means", "quats", "scales", "opacities", "sh"):
        a, b = np.asarray(getattr(grads, name)), np.asarray(getattr(ref_grads, name))
        assert np.all(np.isfinite(a)), name
        np.testing.assert_allclose(a, b, atol=1e-4 * np.abs(b).max() + 1e-7, err_msg=name)


def test_no_entries_at_all(base):
    """Every list empty (what N = 0 bins to): background only, T = 1, zero gradient."""
    table, ids, starts, limits, origins = base
    cts = _zero_cts(origins)
    cts = (cts[0] + 1.0, cts[1] + 1.0)
    (rgbz, t_final), grad = _both(_mosaic, table, ids, starts, jnp.zeros_like(limits), origins, *cts)
    assert float(jnp.abs(rgbz).max()) == 0.0 and float(jnp.abs(t_final - 1.0).max()) == 0.0
    assert float(jnp.abs(grad).max()) == 0.0


def test_lists_past_int32_slots_are_refused_by_name():
    """M + 128 R padded slots at or past 2^31: "pallas" (and a direct call) raises naming the keys;
    "auto" keeps the XLA static-trip path on tpu. Abstract shapes: nothing is allocated."""
    from locojax.render.composite_backends import composite

    m, r = 2**31 - 2**20, 2**14  # fits int32 itself, not once every row is padded to 128 slots
    spec = lambda shape, dtype=jnp.float32: jax.ShapeDtypeStruct(shape, dtype)
    args = (spec((1025, 10)), spec((m,), jnp.int32), spec((r,), jnp.int32), spec((r,), jnp.int32),
            spec((r, 2), jnp.int32))
    with pytest.raises(ValueError, match="int32 slot index space.*max_pairs.*backend='xla'"):
        jax.eval_shape(lambda *a: composite_tiles_mosaic(*a, SUB, W, H, CHUNK), *args)
    with pytest.raises(ValueError, match="int32 slot index space"):
        jax.eval_shape(lambda *a: composite(*a, SUB, W, H, CHUNK, backend="pallas"), *args)
    out = jax.eval_shape(lambda *a: composite(*a, SUB, W, H, CHUNK, backend="auto"), *args)
    assert out[0].shape == (4, r, SUB * SUB)
