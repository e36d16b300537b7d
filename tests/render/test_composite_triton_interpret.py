"""The Pallas Triton compositing kernels (forward and custom-VJP backward), run by the Pallas
interpreter on CPU (`interpret=True`), against the XLA compositor (`composite.composite_tiles`,
itself checked against gsplat in test_rasterize_vs_gsplat.py) and, through
`rasterize(..., backend="pallas")`, against gsplat 1.5.3's torch pieces on the parity scenes.

What interpret mode proves: the kernels' arithmetic, loop bounds, early stop, index clamping and
gradient accumulation. What it cannot: Triton compilation, GPU races and atomic ordering (the
interpreter runs the grid sequentially); see docs/rasterizer_backends.md.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.render.composite import composite_tiles
from locojax.render.pallas.triton_composite import composite_tiles_triton

W, H = 20, 12  # sub-tiles of 8: 3 x 2 rows, the right and bottom ones partly outside the image


def _lists(tile_size):
    """Per-row depth-ordered lists (Gaussian ids) over a W x H image cut into tile_size tiles."""
    tiles_x, tiles_y = -(-W // tile_size), -(-H // tile_size)
    origins = [(tx * tile_size, ty * tile_size) for ty in range(tiles_y) for tx in range(tiles_x)]
    lists = [
        [0, 10, 2, 3, 4, 5, 6, 7, 8, 9],  # clamped opaque Gaussian first: saturates after two entries
        [],  # empty row
        [1, 10, 11],  # non-PSD conic (sigma < 0 at some pixels), shared Gaussian, sub-threshold alpha
        [10],
        [2, 3, 10, 4, 5, 6, 7, 8, 9, 11, 1, 0],  # longer than a chunk, saturates midway
        [10, 11],
    ]
    lists = [lists[i % len(lists)] for i in range(len(origins))]
    return lists, np.array(origins, np.int32)


def _scene(tile_size):
    """Packed table [N + 1, 10] (sentinel last), ids, starts, limits, origins with every case the
    kernels special-case: alpha clamped at 0.999, sigma < 0, alpha < 1/255, saturation (T <= 1e-4),
    empty rows, border tiles, one Gaussian listed in every row, entries past a row's limit."""
    rng = np.random.default_rng(0)
    n = 12
    mean = np.stack([rng.uniform(0, W, n), rng.uniform(0, H, n)], -1)
    inv_var = rng.uniform(0.02, 0.2, n)
    conic = np.stack([inv_var, rng.uniform(-0.02, 0.02, n), inv_var * rng.uniform(0.7, 1.3, n)], -1)
    opac = rng.uniform(0.6, 0.97, n)
    mean[0], conic[0], opac[0] = (3.5, 3.5), (0.01, 0.0, 0.01), 1.0  # clamp: raw >= 0.999 near its centre
    mean[1], conic[1] = (16.5, 3.0), (0.05, 0.2, 0.05)  # indefinite: sigma < 0 off the diagonals
    opac[11] = 0.003  # below 1/255 everywhere
    mean[10], conic[10] = (W / 2, H / 2), (0.004, 0.0, 0.004)  # wide, reaches every tile
    color = rng.uniform(-0.2, 1.2, (n, 3))
    z = rng.uniform(1.0, 5.0, n)
    table = np.concatenate([mean, conic, opac[:, None], color, z[:, None]], -1).astype(np.float32)
    table = np.concatenate([table, np.zeros((1, 10), np.float32)])  # sentinel
    lists, origins = _lists(tile_size)
    starts, ids = [], []
    for lst in lists:
        starts.append(len(ids))
        ids += lst + [5, 6]  # two real ids past each limit: must never be read as list entries
    ids += [n] * 3
    limits = [len(lst) for lst in lists]
    return tuple(jnp.asarray(a) for a in (table, np.array(ids, np.int32), np.array(starts, np.int32),
                                          np.array(limits, np.int32), origins))


def _sigma_raw(table, gid, origin, tile_size):
    """numpy sigma and o exp(-sigma) of Gaussian gid at the pixel centres of the tile at origin."""
    t = np.asarray(table)[gid]
    ly, lx = np.divmod(np.arange(tile_size ** 2), tile_size)
    dx, dy = t[0] - (origin[0] + lx + 0.5), t[1] - (origin[1] + ly + 0.5)
    sigma = 0.5 * (t[2] * dx * dx + t[4] * dy * dy) + t[3] * dx * dy
    return sigma, t[5] * np.exp(-sigma)


def _render(fn, tile_size, chunk):
    def loss(table, ids, starts, limits, origins, g_rgbz, g_t):
        rgbz, t_final = fn(table, ids, starts, limits, origins, tile_size, W, H, chunk)
        return jnp.sum(rgbz * g_rgbz) + jnp.sum(t_final * g_t), (rgbz, t_final)

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


@pytest.mark.parametrize("tile_size", [8, 6])  # 6: 36 pixels, padded to 64 inside the kernel
def test_kernels_match_xla_compositor(tile_size):
    scene = _scene(tile_size)
    table, _, _, limits, _ = scene
    rows = limits.shape[0]
    rng = np.random.default_rng(1)
    cts = (jnp.asarray(rng.normal(size=(4, rows, tile_size ** 2)), jnp.float32),
           jnp.asarray(rng.normal(size=(rows, tile_size ** 2)), jnp.float32))
    pallas = lambda *a: composite_tiles_triton(*a, interpret=True)
    (_, (rgbz, t_final)), grad = _render(pallas, tile_size, 4)(*scene, *cts)
    (_, (rgbz_ref, t_ref)), grad_ref = _render(composite_tiles, tile_size, 4)(*scene, *cts)

    # The scene exercises what it claims to.
    origins = np.asarray(scene[4])
    assert np.any(_sigma_raw(table, 0, origins[0], tile_size)[1] >= 0.999)  # clamp
    sigma1, raw1 = _sigma_raw(table, 1, origins[2], tile_size)
    assert np.any(sigma1 < 0) and np.any((sigma1 >= 0) & (raw1 >= 1 / 255))  # skipped and drawn pixels
    t_final, t_ref = np.asarray(t_final), np.asarray(t_ref)
    assert float(t_ref.min()) < 1e-3  # saturated pixels (stop at T <= 1e-4, exclusive)
    assert np.all(t_ref[1] == 1.0) and np.all(np.asarray(rgbz_ref)[:, 1] == 0.0)  # empty row
    np.testing.assert_allclose(np.asarray(rgbz), np.asarray(rgbz_ref), atol=2e-6, rtol=0)
    np.testing.assert_allclose(t_final, t_ref, atol=1e-6, rtol=0)
    assert np.all(t_final[1] == 1.0) and np.all(np.asarray(rgbz)[:, 1] == 0.0)

    grad, grad_ref = np.asarray(grad), np.asarray(grad_ref)
    assert grad.shape == table.shape and np.all(np.isfinite(grad))
    n = table.shape[0] - 1
    scale = np.abs(grad_ref[:n]).max(0)
    np.testing.assert_allclose(grad[:n], grad_ref[:n], atol=1e-5 * scale.max(), rtol=1e-4)
    assert np.all(np.abs(grad_ref[10]) > 0)  # the Gaussian listed in every row gathers from all
    assert np.all(grad_ref[11] == 0) and np.all(grad[11] == 0)  # below 1/255: never blended


def test_clamped_alpha_passes_no_gradient_to_opacity():
    # Gaussian 0 alone with opacity 1: where o exp(-sigma) >= 0.999 alpha is the constant 0.999,
    # so d/d(opacity) comes only from pixels below the clamp (gsplat Bwd.cu L222).
    table, ids, starts, limits, origins = _scene(8)
    one = jnp.zeros_like(limits).at[0].set(1)
    ids0 = ids.at[starts[0]].set(0)
    grad = jax.jit(jax.grad(
        lambda t: jnp.sum(composite_tiles_triton(t, ids0, starts, one, origins, 8, W, H, 4, interpret=True)[0][3])))
    g_all = grad(table)
    g_clamped = grad(table.at[0, 2:5].set(jnp.array([1e-6, 0.0, 1e-6])))  # raw >= 0.999 at every pixel
    assert float(jnp.abs(g_all[0, 5])) > 0
    assert float(g_clamped[0, 5]) == 0.0 and float(jnp.abs(g_clamped[0, :5]).max()) == 0.0
    np.testing.assert_allclose(g_clamped[0, 9], 0.999 * 64, rtol=1e-6)  # d/dz of sum alpha z


# ----- Through the rasterizer: backend="pallas" on CPU runs the same kernels interpreted. -----

try:  # pytest puts this directory on sys.path (no __init__.py here)
    from render_scenes import random_scene, to_jax
except ImportError:
    from tests.render.render_scenes import random_scene, to_jax

from locojax.render import rasterize  # noqa: E402
from locojax.types import Camera, Gaussians  # noqa: E402

BACKGROUND = np.array([0.2, 0.5, 0.8], np.float32)
LOSS_W = np.array([0.7, -0.4, 1.1], np.float32)
FIELDS = ("means", "quats", "scales", "opacities", "sh")
# The gsplat parity scenes of test_rasterize_vs_gsplat.py: (n, width, height, sh_degree, seed).
PARITY_CASES = [(1, 20, 18, 0, 0), (24, 33, 40, 1, 1), (120, 40, 36, 2, 2), (300, 48, 32, 3, 3)]


@functools.lru_cache(maxsize=None)
def _jitted_loss_and_grads(backend, chunk, kw):
    def loss(g, cam, bg):
        out = rasterize(g, cam, background=bg, chunk=chunk, backend=backend, **dict(kw))
        return jnp.sum(out.rgb * LOSS_W) + 0.1 * jnp.sum(out.depth) + 0.5 * jnp.sum(out.alpha), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 2), has_aux=True))


def _loss_and_grads(g, cam, bg, *, backend, chunk=8, **kw):
    """(RenderOutput, (gradients of the Gaussians, of the background)); one compile per backend and
    options (scenes of equal shapes share it)."""
    (_, out), grads = _jitted_loss_and_grads(backend, chunk, tuple(sorted(kw.items())))(g, cam, jnp.asarray(bg))
    return out, grads


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: f"n{c[0]}_{c[1]}x{c[2]}_sh{c[3]}")
def test_pallas_backend_matches_gsplat_and_xla(case):
    torch = pytest.importorskip("torch")
    pytest.importorskip("gsplat")
    from test_rasterize_vs_gsplat import _torch_loss_and_grads

    n, width, height, sh_degree, seed = case
    arrays, viewmat, K = random_scene(n, width=width, height=height, sh_degree=sh_degree, seed=seed,
                                      spread=0.2 if n == 1 else 1.2, scale=0.4 if n == 1 else 0.12)
    kw = dict(width=width, height=height, sh_degree=sh_degree)
    g, cam = to_jax(arrays, viewmat, K)
    out, (grads, g_bg) = _loss_and_grads(g, cam, BACKGROUND, backend="pallas", **kw)
    tout, tgrads = _torch_loss_and_grads(arrays, viewmat, K, BACKGROUND, **kw)
    assert int(out.overflow) == 0 and tout["alpha"].max() > 0.3
    got = {k: np.asarray(getattr(grads, k)) for k in FIELDS} | {"background": np.asarray(g_bg)}
    # gsplat: the tolerances of test_rasterize_vs_gsplat.py.
    for key in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(np.asarray(getattr(out, key)), tout[key], atol=1e-4, rtol=0, err_msg=key)
    for key, tref in tgrads.items():
        scale = max(np.abs(tref).max(), 1e-3)
        np.testing.assert_allclose(got[key], tref, atol=2e-4 * scale, rtol=2e-3, err_msg=key)
    if n < 300:  # the XLA path on the largest scene only: each comparison is one more compile
        return
    ref, (ref_grads, ref_bg) = _loss_and_grads(g, cam, BACKGROUND, backend="xla", **kw)
    for key, atol in (("rgb", 2e-6), ("alpha", 2e-6), ("depth", 1e-5)):  # depth is ~z (1.5-5) x rgb's error
        np.testing.assert_allclose(np.asarray(getattr(out, key)), np.asarray(getattr(ref, key)), atol=atol,
                                   rtol=0, err_msg=f"{key} vs xla")
    xla = {k: np.asarray(getattr(ref_grads, k)) for k in FIELDS} | {"background": np.asarray(ref_bg)}
    for key, ref_grad in xla.items():
        scale = max(np.abs(ref_grad).max(), 1e-3)
        np.testing.assert_allclose(got[key], ref_grad, atol=1e-5 * scale, rtol=1e-4, err_msg=f"{key} vs xla")


def _gaussians(means, scales, opacities, colors):
    n = means.shape[0]
    return Gaussians(means=jnp.asarray(means, jnp.float32), quats=jnp.tile(jnp.array([1.0, 0, 0, 0]), (n, 1)),
                     scales=jnp.full((n, 3), scales, jnp.float32), opacities=jnp.asarray(opacities, jnp.float32),
                     sh=jnp.asarray(colors, jnp.float32).reshape(n, 1, 3))


def test_pallas_backend_overflow_non_finite_and_empty():
    rng = np.random.default_rng(0)
    n = 40
    cam = Camera(viewmat=jnp.eye(4), K=jnp.array([[30.0, 0, 8], [0, 30, 8], [0, 0, 1]]))
    kw = dict(width=16, height=16, sh_degree=0, tile_capacity=10)  # one 16 x 16 tile, 10 entries kept
    means = np.stack([rng.uniform(-0.1, 0.1, n), rng.uniform(-0.1, 0.1, n), rng.uniform(2, 4, n)], -1)
    crowded = _gaussians(means, 0.05, np.full(n, 0.3), rng.normal(0, 0.5, (n, 3)))
    bad = crowded.replace(means=crowded.means.at[0, 1].set(jnp.nan), scales=crowded.scales.at[3, 0].set(jnp.inf),
                          sh=crowded.sh.at[5, 0, 2].set(jnp.nan), opacities=crowded.opacities.at[7].set(jnp.nan))
    for g, overflow, invalid in ((crowded, n - 10, 0), (bad, n - 4 - 10, 4)):
        out, (grads, g_bg) = _loss_and_grads(g, cam, BACKGROUND, backend="pallas", **kw)
        ref, (ref_grads, ref_bg) = _loss_and_grads(g, cam, BACKGROUND, backend="xla", **kw)
        assert int(out.overflow) == int(ref.overflow) == overflow
        assert int(out.num_invalid) == int(ref.num_invalid) == invalid
        for key in ("rgb", "alpha", "depth"):
            np.testing.assert_allclose(np.asarray(getattr(out, key)), np.asarray(getattr(ref, key)), atol=2e-6,
                                       err_msg=key)
        for a, b in zip(jax.tree_util.tree_leaves((grads, g_bg)), jax.tree_util.tree_leaves((ref_grads, ref_bg))):
            assert np.all(np.isfinite(np.asarray(a)))
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5 * float(np.abs(b).max() + 1e-3),
                                       rtol=1e-4)
    empty = _gaussians(np.zeros((0, 3)), 0.1, np.zeros(0), np.zeros((0, 3)))  # N = 0
    out = jax.jit(lambda g: rasterize(g, cam, background=BACKGROUND, backend="pallas", width=16, height=16,
                                      sh_degree=0))(empty)
    np.testing.assert_allclose(np.asarray(out.rgb), np.broadcast_to(BACKGROUND, (16, 16, 3)))
    assert float(out.alpha.max()) == 0.0 and int(out.overflow) == 0


def test_jax_without_pallas_triton_routing_is_refused_by_name(monkeypatch):
    import locojax.render.pallas.triton_composite as triton_composite
    from locojax.render import composite_backends

    monkeypatch.setattr(triton_composite, "_jax_version", lambda: (0, 9, 0))
    with pytest.raises(RuntimeError, match=r"needs jax >= 0\.9\.1.*found jax"):
        composite_tiles_triton(*_scene(8), 8, W, H, 4, interpret=True)
    statics = (8, W, H, 4)
    assert composite_backends._branches("auto", statics)["cuda"].func is composite_backends._xla
    assert composite_backends._branches("pallas", statics)["cuda"].func is composite_backends._triton


def test_table_past_int32_offsets_is_refused_before_tracing():
    s = jax.ShapeDtypeStruct
    rows = 2**27  # x 16 columns = 2^31 flat offsets
    args = (s((rows, 10), jnp.float32), s((64,), jnp.int32), s((4,), jnp.int32), s((4,), jnp.int32),
            s((4, 2), jnp.int32))
    with pytest.raises(ValueError, match="int32 offsets.*config.render.backend='xla'"):
        jax.eval_shape(lambda *a: composite_tiles_triton(*a, 8, 16, 16, 4), *args)
    from locojax.render import composite_backends

    assert composite_backends._branches("auto", (8, 16, 16, 4), None, rows)["cuda"].func is composite_backends._xla
    fits = composite_backends._branches("auto", (8, 16, 16, 4), None, rows - 1)
    assert fits["cuda"].func is composite_backends._triton
    ok = (s((rows - 1, 10), jnp.float32),) + args[1:]
    assert jax.eval_shape(lambda *a: composite_tiles_triton(*a, 8, 16, 16, 4), *ok)[1].shape == (4, 64)
