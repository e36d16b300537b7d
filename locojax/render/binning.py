"""Bin projected Gaussians into screen tiles with static shapes (gsplat's `isect_tiles` +
`isect_offset_encode`, made jittable).

1. Gaussians are ordered by depth (culled ones last). Each emits the tiles of its bounding box
   (gsplat's tile rectangle: floor((mean - radius) / tile) .. ceil((mean + radius) / tile), clamped)
   into a pair buffer of static capacity `max_pairs`, in depth order: pair p belongs to the Gaussian
   whose running tile count first exceeds p (a searchsorted). If the buffer is too small, the pairs
   of the farthest Gaussians are the ones dropped, so every tile keeps a nearest-first prefix.
   A pair whose tile the Gaussian cannot reach is dropped before sorting: the minimum of
   sigma = 0.5 d^T Conic d over the tile's pixel centres exceeds log(255 opacity), i.e. alpha < 1/255
   at every pixel of the tile, so gsplat's compositor would skip it there anyway (an exact test with
   a small margin, not an approximation; it removes the empty corners of gsplat's bounding boxes).
2. A stable sort on the tile id then gives gsplat's (tile, depth) order; per-tile offsets come from a
   searchsorted.
3. Each tile reads a fixed window of its first `tile_capacity` Gaussians (nearest first); the rest
   are dropped. Both kinds of drop are counted in `overflow`.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class TileBins:
    """gaussian_ids [T, C] int32 into the projected Gaussians (`sentinel` = N where empty), counts [T]
    int32 (Gaussians listed per tile, before the capacity cut), overflow [] int32."""

    gaussian_ids: jax.Array
    counts: jax.Array
    overflow: jax.Array


def tile_grid(width: int, height: int, tile_size: int) -> tuple[int, int]:
    """(tiles_x, tiles_y) covering the image."""
    return -(-width // tile_size), -(-height // tile_size)


def _min_sigma_over_rect(mx, my, a, b, c, x0, x1, y0, y1):
    """min over [x0, x1] x [y0, y1] of 0.5 (a dx^2 + 2 b dx dy + c dy^2), d = p - mean (elementwise).

    A convex quadratic: 0 if the mean is inside, else the minimum over the four edges, each a 1D
    quadratic minimised at a clamped stationary point.
    """
    def edge(fixed, lo, hi, p, q, r):  # d_fixed given; minimise 0.5 (p df^2 + 2 q df dv + r dv^2)
        dv = jnp.clip(-q * fixed / r, lo, hi)
        return 0.5 * (p * fixed * fixed + 2.0 * q * fixed * dv + r * dv * dv)

    dx0, dx1, dy0, dy1 = x0 - mx, x1 - mx, y0 - my, y1 - my
    m = jnp.minimum(jnp.minimum(edge(dx0, dy0, dy1, a, b, c), edge(dx1, dy0, dy1, a, b, c)),
                    jnp.minimum(edge(dy0, dx0, dx1, c, b, a), edge(dy1, dx0, dx1, c, b, a)))
    inside = (dx0 <= 0) & (dx1 >= 0) & (dy0 <= 0) & (dy1 >= 0)
    return jnp.where(inside, 0.0, m)


def bin_gaussians(means2d, radii, depths, conics=None, opacities=None, *, width: int, height: int,
                  tile_size: int, max_pairs: int, tile_capacity: int) -> TileBins:
    """Tile lists of one image.

    Args:
      means2d [N, 2], radii [N, 2] int32 (0 = culled), depths [N]; optionally conics [N, 3] and
      opacities [N] for the exact Gaussian-tile test (without them: gsplat's bounding boxes only).
    Returns:
      TileBins with T = tiles_x * tiles_y rows of C = tile_capacity ids, nearest first.
    """
    n = means2d.shape[0]
    tiles_x, tiles_y = tile_grid(width, height, tile_size)
    num_tiles = tiles_x * tiles_y
    means2d = jax.lax.stop_gradient(means2d)
    depths = jax.lax.stop_gradient(depths)
    visible = jnp.all(radii > 0, axis=-1)

    order = jnp.argsort(jnp.where(visible, depths, jnp.inf), stable=True).astype(jnp.int32)
    m, r, vis = means2d[order], radii[order].astype(means2d.dtype), visible[order]
    tmin = jnp.floor((m - r) / tile_size).astype(jnp.int32)
    tmax = jnp.ceil((m + r) / tile_size).astype(jnp.int32)
    lim = jnp.array([tiles_x, tiles_y], jnp.int32)
    tmin = jnp.clip(tmin, 0, lim)
    tmax = jnp.clip(tmax, 0, lim)
    span = tmax - tmin  # [N, 2]
    per_gauss = jnp.where(vis, span[:, 0] * span[:, 1], 0)
    ends = jnp.cumsum(per_gauss)  # inclusive running pair count, [N]
    total = ends[-1] if n > 0 else jnp.int32(0)

    p = jnp.arange(max_pairs, dtype=jnp.int32)
    # Depth rank of pair p's Gaussian = #{g : ends[g] <= p} (a searchsorted, done as scatter + cumsum,
    # which is O(P) instead of O(P log N)).
    owner = jnp.cumsum(jnp.zeros((max_pairs,), jnp.int32).at[ends].add(1, mode="drop"))
    owner_c = jnp.minimum(owner, max(n - 1, 0))
    local = p - (ends[owner_c] - per_gauss[owner_c])
    width_t = jnp.maximum(span[owner_c, 0], 1)
    tx = tmin[owner_c, 0] + local % width_t
    ty = tmin[owner_c, 1] + local // width_t
    pair_valid = p < total
    if conics is not None:
        src = order[owner_c]
        cn = jax.lax.stop_gradient(conics)[src]
        op = jax.lax.stop_gradient(opacities)[src]
        x0 = (tx * tile_size).astype(means2d.dtype) + 0.5
        y0 = (ty * tile_size).astype(means2d.dtype) + 0.5
        ms = _min_sigma_over_rect(m[owner_c, 0], m[owner_c, 1], cn[:, 0], cn[:, 1], cn[:, 2],
                                  x0, x0 + (tile_size - 1), y0, y0 + (tile_size - 1))
        # alpha >= 1/255 needs sigma <= log(255 opacity); margin 1e-3 against rounding.
        reach = ms <= jnp.log(jnp.maximum(op, 1e-30) * 255.0) + 1e-3
        pair_valid = pair_valid & reach
    tile_of_pair = jnp.where(pair_valid, ty * tiles_x + tx, num_tiles)
    gauss_of_pair = jnp.where(pair_valid, order[owner_c] if n > 0 else 0, n)

    # Pairs are already in depth order, so a stable sort on the tile id is gsplat's (tile, depth) sort.
    if (num_tiles + 1) * max_pairs < 2**31:
        # One packed int32 key (tile, pair index): unique keys, so a plain sort is stable; ~5x faster
        # on CPU than a two-operand stable sort.
        key = jax.lax.sort(tile_of_pair * max_pairs + p)
        tile_sorted = key // max_pairs
        gauss_sorted = gauss_of_pair[key % max_pairs]
    else:
        tile_sorted, gauss_sorted = jax.lax.sort((tile_of_pair, gauss_of_pair), num_keys=1, is_stable=True)
    tiles = jnp.arange(num_tiles, dtype=jnp.int32)
    starts = jnp.searchsorted(tile_sorted, tiles, side="left").astype(jnp.int32)
    stops = jnp.searchsorted(tile_sorted, tiles, side="right").astype(jnp.int32)
    counts = stops - starts

    slot = jnp.arange(tile_capacity, dtype=jnp.int32)
    idx = jnp.minimum(starts[:, None] + slot[None, :], max_pairs - 1)
    ids = jnp.where(slot[None, :] < counts[:, None], gauss_sorted[idx], n)
    overflow = jnp.maximum(total - max_pairs, 0) + jnp.sum(jnp.maximum(counts - tile_capacity, 0))
    return TileBins(gaussian_ids=ids.astype(jnp.int32), counts=counts, overflow=overflow.astype(jnp.int32))
