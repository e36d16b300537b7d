"""`composite_tiles(..., early_exit=False)` (static trip count, masked chunks) gives the numbers of the
early-exit path, forward and gradient, on the gsplat parity scenes (test_rasterize_vs_gsplat.py)
and on an opaque stack that saturates before the end of its lists."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.render import bin_gaussians, composite_tiles, project_gaussians
from locojax.render.binning import tile_grid

try:  # pytest puts this directory on sys.path (no __init__.py here)
    from render_scenes import random_scene, to_jax
except ImportError:
    from tests.render.render_scenes import random_scene, to_jax

TILE, SUB, CHUNK, CAPACITY = 16, 8, 8, 256


def composite_inputs(arrays, viewmat, K, *, width, height, sh_degree):
    """One image's compositing inputs, laid out as `rasterize` lays them out."""
    g, cam = to_jax(arrays, viewmat, K)
    table, ids, starts, counts, origins, overflow = jax.jit(
        lambda g, cam: _layout(g, cam, width=width, height=height, sh_degree=sh_degree))(g, cam)
    assert int(jnp.max(counts)) <= CAPACITY and int(overflow) == 0
    return table, ids, starts, counts, origins


def _layout(g, cam, *, width, height, sh_degree):
    p = project_gaussians(g, cam, width=width, height=height, sh_degree=sh_degree)
    bins = bin_gaussians(p.means2d, p.radii, p.depths, p.conics, p.opacities, width=width, height=height,
                         tile_size=TILE, max_pairs=2048, tile_capacity=CAPACITY, sub_size=SUB)
    table = jnp.concatenate([p.means2d, p.conics, p.opacities[:, None], p.colors, p.depths[:, None]], -1)
    table = jnp.where(jnp.all(p.radii > 0, -1)[:, None], table, 0.0)
    table = jnp.concatenate([table, jnp.zeros((1, 10))], 0)
    tiles_x, tiles_y = tile_grid(width, height, TILE)
    s = TILE // SUB
    t = jnp.arange(tiles_x * tiles_y)[:, None]
    jy, jx = jnp.divmod(jnp.arange(s * s)[None, :], s)
    origins = jnp.stack([(t % tiles_x) * TILE + jx * SUB, (t // tiles_x) * TILE + jy * SUB], -1).reshape(-1, 2)
    return table, bins.ids, bins.starts, bins.counts, origins.astype(jnp.int32), bins.overflow


@partial(jax.jit, static_argnames=("width", "height", "early_exit", "max_count"))
def run(inputs, cot, *, width, height, early_exit, max_count):
    """Forward and VJP w.r.t. the table."""
    table, rest = inputs[0], inputs[1:]

    def f(table):
        return composite_tiles(table, *rest, SUB, width, height, CHUNK, early_exit=early_exit,
                               max_count=max_count)

    out, vjp = jax.vjp(f, table)
    return out, vjp(cot)[0]


CASES = [  # (n, width, height, sh_degree, seed): two of test_rasterize_vs_gsplat.py's scenes
    (24, 33, 40, 1, 1),
    (300, 48, 32, 3, 3),
]


def opaque_stack(width=32, height=24):
    """200 large opaque Gaussians on top of each other: every pixel saturates after a few."""
    arrays, viewmat, K = random_scene(200, width=width, height=height, sh_degree=0, seed=5, spread=0.1, scale=0.6)
    arrays["opacities"][:] = 0.99
    return arrays, viewmat, K


@pytest.mark.parametrize("case", CASES + ["opaque"], ids=lambda c: c if isinstance(c, str) else f"n{c[0]}")
def test_static_trip_count_matches_early_exit(case):
    if case == "opaque":
        width, height, sh = 32, 24, 0
        scene = opaque_stack(width, height)
    else:
        n, width, height, sh, seed = case
        scene = random_scene(n, width=width, height=height, sh_degree=sh, seed=seed,
                             spread=0.2 if n == 1 else 1.2, scale=0.4 if n == 1 else 0.12)
    inputs = composite_inputs(*scene, width=width, height=height, sh_degree=sh)
    rows, pix = inputs[2].shape[0], SUB * SUB
    rng = np.random.default_rng(0)
    cot = (jnp.asarray(rng.normal(size=(4, rows, pix)), jnp.float32),
           jnp.asarray(rng.normal(size=(rows, pix)), jnp.float32))
    kw = dict(width=width, height=height)
    (rgbz, t), grad = run(inputs, cot, early_exit=True, max_count=None, **kw)
    assert float(jnp.max(1.0 - t)) > 0.3 and float(jnp.max(jnp.abs(grad))) > 0  # not an empty scene
    if case == "opaque":  # saturated long before the lists end: the static walk runs past the stop
        assert int(jnp.max(inputs[3])) > 8 * CHUNK and float(jnp.median(t)) < 1e-3
    # The 24-Gaussian scene also checks the default bound (M = every entry of `ids`: slow elsewhere).
    for max_count in ((CAPACITY, None) if case == CASES[0] else (CAPACITY,)):
        (rgbz_s, t_s), grad_s = run(inputs, cot, early_exit=False, max_count=max_count, **kw)
        np.testing.assert_allclose(rgbz_s, rgbz, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(t_s, t, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(grad_s, grad, rtol=1e-5, atol=1e-6 * float(jnp.max(jnp.abs(grad))))


def test_static_trip_count_has_no_data_dependent_loop():
    """The lowered static path has only loops with a trip count fixed at trace time (scans), and the
    early-exit path keeps its data-dependent while loops."""
    scene = random_scene(24, width=33, height=40, sh_degree=1, seed=1)
    inputs = composite_inputs(*scene, width=33, height=40, sh_degree=1)

    def jaxpr(early_exit):
        f = lambda table: jnp.sum(composite_tiles(table, *inputs[1:], SUB, 33, 40, CHUNK, early_exit=early_exit,
                                                  max_count=CAPACITY)[0])
        return str(jax.make_jaxpr(jax.grad(f))(inputs[0]))

    assert "while[" not in jaxpr(False) and "scan[" in jaxpr(False)
    assert "while[" in jaxpr(True)
