"""Public rasterizer: project -> bin into tiles -> composite, all with static shapes."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from locojax.render.binning import bin_gaussians, tile_grid
from locojax.render.composite_backends import BACKENDS, composite
from locojax.render.dense import finish_output
from locojax.render.projection import project_gaussians
from locojax.render.validate import check_inputs
from locojax.types import Camera, Gaussians, RenderOutput

DEFAULT_TILE_SIZE = 16
# Compositing tile (`subtile_size=None`: this where it divides tile_size): each 16 x 16 binning tile
# is composited as four 8 x 8 sub-tiles with their own (exactly filtered) lists, which evaluates
# ~40% fewer (Gaussian, pixel) pairs on the benchmark scenes, while sorting only 16 x 16 tile pairs.
DEFAULT_SUBTILE_SIZE = 8
DEFAULT_CHUNK = 16
DEFAULT_TILE_CAPACITY = 4096


def default_max_pairs(num_gaussians: int, num_tiles: int = 2**31, tile_capacity: int = DEFAULT_TILE_CAPACITY) -> int:
    """Pair-buffer capacity per image: 8 tiles per Gaussian on average (trained and feed-forward
    scenes at 256x256 use ~1-6), at least 16384, and at most twice what the per-tile windows can
    hold (2 x tiles x tile_capacity; 2M at 256x256): pairs beyond that would mostly be cut by the
    tile windows anyway, and binning time and memory grow with the buffer (1.6M Gaussians: 12.6M
    -> 2.1M entries)."""
    return max(16384, min(8 * num_gaussians, 2 * num_tiles * tile_capacity))


def _pad_empty(g: Gaussians) -> Gaussians:
    """N = 0 -> one invisible Gaussian, so that every array keeps a non-empty axis."""
    if g.means.shape[-2] > 0:
        return g
    k = g.sh.shape[-2]
    z = lambda *s: jnp.zeros(g.means.shape[:-2] + s, g.means.dtype)
    return Gaussians(means=z(1, 3), quats=z(1, 4).at[..., 0].set(1.0), scales=z(1, 3) + 1.0,
                     opacities=z(1), sh=z(1, k, 3))


INDEX_LIMIT = 2**31  # int32 index spaces (ids, starts, table rows) must stay below this


def image_group_size(num_images: int, num_gaussians: int, entries: int) -> int:
    """Images composited in one index space: the largest divisor G of num_images with G x entries
    list entries and G x num_gaussians + 1 table rows below 2^31 (int32 ids and starts).

    Raises ValueError (naming the config keys) when even one image does not fit.
    """
    def fits(g):
        return g * entries < INDEX_LIMIT and g * num_gaussians + 1 < INDEX_LIMIT

    if not fits(1):
        raise ValueError(
            f"one image needs {entries:,} tile-list entries and {num_gaussians:,} Gaussians, past the int32 "
            f"index space (2^31): lower config.render.max_pairs (per image) or the Gaussian count")
    return max(g for g in range(1, num_images + 1) if num_images % g == 0 and fits(g))


def _render_images(gaussians: Gaussians, cameras: Camera, background, *, width, height, sh_degree, near,
                   far, eps2d, tile_size, max_pairs, tile_capacity, chunk, subtile_size, backend):
    """Render S scenes x V cameras: gaussians [S, N, ...], cameras [S, V, ...], background None or
    [S, V, 3] -> RenderOutput [S, V, ...].

    The tiles of all S x V images are composited in one call (one while loop over list chunks, one
    table of S x V x N screen-space Gaussians), which is why this beats vmapping a one-camera render;
    only where their int32 index space would pass 2^31 are they composited in equal groups, one
    after the other (`image_group_size`).
    """
    s, n = gaussians.means.shape[:2]
    v = cameras.viewmat.shape[1]
    num_images = s * v

    def project_scene(g, cams):
        return jax.vmap(lambda c: project_gaussians(g, c, width=width, height=height, sh_degree=sh_degree,
                                                    near=near, far=far, eps2d=eps2d))(cams)

    proj = jax.vmap(project_scene)(gaussians, cameras)  # fields [S, V, N, ...]
    proj = jax.tree_util.tree_map(lambda x: x.reshape((num_images,) + x.shape[2:]), proj)
    def bin_image(m, r, d, c, o):
        return bin_gaussians(m, r, d, c, o, width=width, height=height, tile_size=tile_size,
                             max_pairs=max_pairs, tile_capacity=tile_capacity, sub_size=subtile_size)

    fields = (proj.means2d, proj.radii, proj.depths, proj.conics, proj.opacities)
    if num_images == 1:  # vmap of the sorts, gathers and scatters over one image only costs
        bins = jax.tree_util.tree_map(lambda x: x[None], bin_image(*(f[0] for f in fields)))
    else:
        bins = jax.vmap(bin_image)(*fields)
    table = jnp.concatenate([proj.means2d, proj.conics, proj.opacities[..., None], proj.colors,
                             proj.depths[..., None]], axis=-1)  # [I, N, 10]
    table = jnp.where(jnp.all(proj.radii > 0, -1)[..., None], table, 0.0)  # culled: opacity 0

    tiles_x, tiles_y = tile_grid(width, height, tile_size)
    s_per = tile_size // subtile_size  # sub-tiles per tile side
    t = jnp.arange(tiles_x * tiles_y, dtype=jnp.int32)[:, None]
    jy, jx = jnp.divmod(jnp.arange(s_per * s_per, dtype=jnp.int32)[None, :], s_per)
    origins = jnp.stack([(t % tiles_x) * tile_size + jx * subtile_size,
                         (t // tiles_x) * tile_size + jy * subtile_size], -1).reshape(-1, 2)
    entries = bins.ids.shape[1]  # per image
    per_group = image_group_size(num_images, n, entries)

    def composite_group(table, ids, starts, limits):  # [G, N, 10], [G, M], [G, T], [G, T] -> [4, G T, P], [G T, P]
        g = table.shape[0]
        sentinel = g * n
        table = jnp.concatenate([table.reshape(g * n, -1), jnp.zeros((1, table.shape[-1]), table.dtype)], 0)
        offsets = jnp.arange(g, dtype=jnp.int32)[:, None]
        ids = jnp.where(ids >= n, sentinel, ids + offsets * n).reshape(-1)
        starts = (starts + offsets * entries).reshape(-1)
        return composite(table, ids, starts, limits.reshape(-1), jnp.tile(origins, (g, 1)), subtile_size,
                         width, height, chunk, backend, max_count=tile_capacity)

    parts = (table, bins.ids, bins.starts, bins.counts)
    if per_group == num_images:
        rgbz, t_final = composite_group(*parts)
    else:  # one index space per group of images, each < 2^31 (see image_group_size)
        grouped = tuple(x.reshape((num_images // per_group, per_group) + x.shape[1:]) for x in parts)
        rgbz, t_final = jax.lax.map(lambda x: composite_group(*x), grouped)
        rgbz = jnp.moveaxis(rgbz, 1, 0).reshape((4, -1) + rgbz.shape[3:])
        t_final = t_final.reshape((-1,) + t_final.shape[2:])
    rgb, zacc = jnp.moveaxis(rgbz[:3], 0, -1), rgbz[3]

    def to_image(x):  # [I*T*s*s, sub*sub, ...] -> [S, V, H, W, ...]
        tail = x.shape[2:]
        x = x.reshape((num_images, tiles_y, tiles_x, s_per, s_per, subtile_size, subtile_size) + tail)
        x = jnp.transpose(x, (0, 1, 3, 5, 2, 4, 6) + tuple(range(7, 7 + len(tail))))
        x = x.reshape((s, v, tiles_y * tile_size, tiles_x * tile_size) + tail)
        return x[:, :, :height, :width]

    bg = None if background is None else background[:, :, None, None, :]
    return finish_output(to_image(rgb), to_image(zacc), to_image(t_final), bg,
                         bins.overflow.reshape(s, v),
                         jnp.broadcast_to(proj.num_invalid.reshape(s, v), (s, v)))


def _options(n, width, height, tile_size, max_pairs, tile_capacity, chunk, subtile_size, backend):
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {', '.join(map(repr, BACKENDS))}")
    tiles_x, tiles_y = tile_grid(width, height, max(int(tile_size), 1))
    cap = DEFAULT_TILE_CAPACITY if tile_capacity is None else max(int(tile_capacity), 1)
    max_pairs = default_max_pairs(n, tiles_x * tiles_y, cap) if max_pairs is None else int(max_pairs)
    if subtile_size is None:  # default: 8 x 8 sub-tiles where they divide the tile
        subtile_size = DEFAULT_SUBTILE_SIZE if tile_size % DEFAULT_SUBTILE_SIZE == 0 else tile_size
    subtile_size = int(subtile_size)
    if subtile_size < 1 or tile_size % subtile_size:
        raise ValueError(f"subtile_size must divide tile_size={tile_size}, got {subtile_size}")
    tile_capacity = min(DEFAULT_TILE_CAPACITY if tile_capacity is None else int(tile_capacity), max_pairs)
    chunk = min(int(chunk), tile_capacity)
    if tile_size < 1 or max_pairs < 1 or tile_capacity < 1 or chunk < 1:
        raise ValueError("tile_size, max_pairs, tile_capacity and chunk must be positive")
    return dict(tile_size=int(tile_size), max_pairs=max_pairs, tile_capacity=tile_capacity, chunk=chunk,
                subtile_size=subtile_size, backend=backend)


def rasterize(gaussians: Gaussians, camera: Camera, *, width: int, height: int, sh_degree: int,
              background: Optional[jax.Array] = None, near: float = 0.01, far: float = 1e10,
              eps2d: float = 0.3, tile_size: int = DEFAULT_TILE_SIZE, max_pairs: Optional[int] = None,
              tile_capacity: Optional[int] = None, chunk: int = DEFAULT_CHUNK,
              subtile_size: Optional[int] = None, backend: str = "auto") -> RenderOutput:
    """Render one camera. See `locojax.render` for semantics and capacities, and
    `locojax.render.composite_backends` for `backend` ("auto", "xla" or "pallas")."""
    check_inputs(gaussians, camera, sh_degree=sh_degree, background=background, batch_dims=0)
    g = _pad_empty(gaussians)
    opts = _options(g.means.shape[0], width, height, tile_size, max_pairs, tile_capacity, chunk, subtile_size,
                    backend)
    add2 = lambda x: x[None, None]
    bg = None if background is None else add2(jnp.asarray(background))
    out = _render_images(jax.tree_util.tree_map(lambda x: x[None], g), jax.tree_util.tree_map(add2, camera),
                         bg, width=width, height=height, sh_degree=sh_degree, near=near, far=far,
                         eps2d=eps2d, **opts)
    return jax.tree_util.tree_map(lambda x: x[0, 0], out)


def rasterize_batch(gaussians: Gaussians, cameras: Camera, *, width: int, height: int, sh_degree: int,
                    background: Optional[jax.Array] = None, near: float = 0.01, far: float = 1e10,
                    eps2d: float = 0.3, tile_size: int = DEFAULT_TILE_SIZE, max_pairs: Optional[int] = None,
                    tile_capacity: Optional[int] = None, chunk: int = DEFAULT_CHUNK,
                    subtile_size: Optional[int] = None, backend: str = "auto") -> RenderOutput:
    """Render S scenes x V cameras: gaussians [S, N, ...], cameras [S, V, ...] -> RenderOutput [S, V, ...].

    `background` is [3] or [S, V, 3]. Capacities apply per image. `backend` selects the compositing
    implementation per platform (`locojax.render.composite_backends`).
    """
    if getattr(cameras.viewmat, "ndim", 0) != 4:
        raise ValueError(f"cameras.viewmat must have shape [S, V, 4, 4], got "
                         f"{tuple(getattr(cameras.viewmat, 'shape', ()))}")
    s, v = cameras.viewmat.shape[:2]
    check_inputs(gaussians, cameras, sh_degree=sh_degree, background=None, batch_dims=1, num_views=v)
    if gaussians.means.shape[0] != s:
        raise ValueError(f"gaussians have S={gaussians.means.shape[0]} scenes but cameras have S={s}")
    if background is not None:
        background = jnp.asarray(background)
        if background.shape not in {(3,), (s, v, 3)}:
            raise ValueError(f"background must have shape [3] or [S={s}, V={v}, 3], got {background.shape}")
        background = jnp.broadcast_to(background, (s, v, 3))
    g = _pad_empty(gaussians)
    opts = _options(g.means.shape[1], width, height, tile_size, max_pairs, tile_capacity, chunk, subtile_size,
                    backend)
    return _render_images(g, cameras, background, width=width, height=height, sh_degree=sh_degree,
                          near=near, far=far, eps2d=eps2d, **opts)
