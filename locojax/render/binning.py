"""Bin projected Gaussians into screen tiles with static shapes (gsplat's `isect_tiles` +
`isect_offset_encode`, made jittable), then split each tile's list into sub-tile lists.

1. Gaussians are ordered by depth (culled ones last). Each emits the tiles of its bounding box
   (gsplat's tile rectangle: floor((mean - radius) / tile) .. ceil((mean + radius) / tile), clamped)
   into a pair buffer of static capacity `max_pairs`, in depth order: pair p belongs to the Gaussian
   whose running tile count first exceeds p. If the buffer is too small, the pairs of the farthest
   Gaussians are the ones dropped, so every tile keeps a nearest-first prefix.
   A pair whose tile the Gaussian cannot reach is dropped before sorting: the minimum of
   sigma = 0.5 d^T Conic d over the tile's pixel centres exceeds log(255 opacity), i.e. alpha < 1/255
   at every pixel of the tile, so gsplat's compositor would skip it there anyway (an exact test with
   a small margin, not an approximation; it removes the empty corners of gsplat's bounding boxes).
2. A stable sort on the tile id then gives gsplat's (tile, depth) order; per-tile offsets come from a
   searchsorted. Each tile keeps its first `tile_capacity` entries (nearest first); both kinds of
   drop are counted in `overflow`.
3. Optionally every tile is cut into (tile / sub)^2 sub-tiles, each given the subsequence of its
   tile's list that reaches it (the same exact test, evaluated per sub-tile when the pairs are
   made; a pair is kept if it reaches any sub-tile), by a cumulative count instead of a second
   sort: the lists stay in depth order, and no sub-tile can lose an entry (each tile entry has room
   for all its sub-tiles). Compositing small sub-tiles evaluates far fewer (Gaussian, pixel) pairs
   than compositing the big tiles, while the sort runs over the few big-tile pairs.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class TileBins:
    """Tile lists of one image, stored flat.

    ids [M] int32: Gaussian ids grouped by tile, nearest first within a tile (`n` where unused);
    starts [T] int32: first entry of each tile in `ids`; counts [T] int32: entries to composite
    (after the `tile_capacity` cut); overflow [] int32: pairs dropped for lack of capacity.
    Tiles are numbered row-major over the grid of `tile_size` tiles (with sub-tiles: sub-tile j of
    tile t is number t * s^2 + j, j row-major within the tile).
    """

    ids: jax.Array
    starts: jax.Array
    counts: jax.Array
    overflow: jax.Array


def tile_grid(width: int, height: int, tile_size: int) -> tuple[int, int]:
    """(tiles_x, tiles_y) covering the image."""
    return -(-width // tile_size), -(-height // tile_size)


def _min_sigma_over_rect(mx, my, a, b, c, inv_a, inv_c, x0, x1, y0, y1):
    """min over [x0, x1] x [y0, y1] of 0.5 (a dx^2 + 2 b dx dy + c dy^2), d = p - mean (elementwise;
    inv_a = 1 / a, inv_c = 1 / c).

    A convex quadratic: 0 if the mean is inside, else the minimum over the four edges, each a 1D
    quadratic minimised at a clamped stationary point.
    """
    def edge(fixed, lo, hi, p, q, r, inv_r):  # d_fixed given; minimise 0.5 (p df^2 + 2 q df dv + r dv^2)
        dv = jnp.clip(-q * fixed * inv_r, lo, hi)
        return 0.5 * (p * fixed * fixed + 2.0 * q * fixed * dv + r * dv * dv)

    dx0, dx1, dy0, dy1 = x0 - mx, x1 - mx, y0 - my, y1 - my
    m = jnp.minimum(jnp.minimum(edge(dx0, dy0, dy1, a, b, c, inv_c), edge(dx1, dy0, dy1, a, b, c, inv_c)),
                    jnp.minimum(edge(dy0, dx0, dx1, c, b, a, inv_a), edge(dy1, dx0, dx1, c, b, a, inv_a)))
    inside = (dx0 <= 0) & (dx1 >= 0) & (dy0 <= 0) & (dy1 >= 0)
    return jnp.where(inside, 0.0, m)


def _reaches(g, x0, y0, size):
    """Whether each Gaussian can reach alpha >= 1/255 at some pixel centre of the size x size square
    at pixel (x0, y0) [K]. g [K, 8]: mean x, y | conic a, b, c | 1/a, 1/c | log(255 opacity)."""
    x0 = x0.astype(g.dtype) + 0.5
    y0 = y0.astype(g.dtype) + 0.5
    ms = _min_sigma_over_rect(g[:, 0], g[:, 1], g[:, 2], g[:, 3], g[:, 4], g[:, 5], g[:, 6],
                              x0, x0 + (size - 1), y0, y0 + (size - 1))
    return ms <= g[:, 7] + 1e-3  # margin against rounding


def _sortable_int32(x):
    """float32 -> int32 with the same total order (for finite values and +-inf)."""
    b = jax.lax.bitcast_convert_type(jnp.where(x == 0.0, 0.0, x), jnp.int32)  # -0.0 == 0.0 as in a float sort
    return jnp.where(b < 0, b ^ jnp.int32(0x7FFFFFFF), b)


def argsort_stable(x):
    """Stable argsort of float32 x [N] -> int32 [N], as a few single-operand int32 sorts.

    XLA:CPU sorts one int32 array ~7x faster than (key, index) pairs, so this is an LSD radix sort
    whose passes sort (digit << index_bits | position) packed into one int32 (unique, so stable).
    """
    n = x.shape[0]
    idx_bits = max(1, (n - 1).bit_length())
    if idx_bits > 24:
        return jnp.argsort(x, stable=True).astype(jnp.int32)
    digit_bits = 31 - idx_bits
    # Unsigned view of the sortable key: signed order of the key = unsigned order of key ^ 2^31.
    u = _sortable_int32(x) ^ jnp.int32(-2**31)
    pos = jnp.arange(n, dtype=jnp.int32)
    perm = pos
    for shift in range(0, 32, digit_bits):
        digit = jax.lax.shift_right_logical(u[perm], jnp.int32(shift)) & jnp.int32(2**digit_bits - 1)
        packed = jax.lax.sort(jax.lax.shift_left(digit, jnp.int32(idx_bits)) | pos)
        perm = perm[packed & jnp.int32(2**idx_bits - 1)]
    return perm


INT32_MAX = 2**31 - 1


def _pair_offsets(per_gauss, max_pairs: int, num_tiles: int):
    """Inclusive running pair count per depth-ordered Gaussian [N], the pairs made (int32 []) and
    those dropped for lack of `max_pairs` (int32 []).

    N x tiles may pass 2^31 (e.g. 300K large Gaussians at 1080p), where a plain int32 cumsum would
    wrap: then the running count saturates at max_pairs + 1 (exact below it, which is all the pair
    buffer reads) and the dropped count is summed in float32 (approximate past 2^24, saturating at
    int32's maximum; reported, never wrapped).
    """
    n = per_gauss.shape[0]
    if n == 0:
        zero = jnp.int32(0)
        return jnp.zeros((0,), jnp.int32), zero, zero
    if n * num_tiles < SATURATE_ABOVE:
        ends = jnp.cumsum(per_gauss)
        return ends, ends[-1], jnp.maximum(ends[-1] - max_pairs, 0)
    cap = max_pairs + 1  # < 2^30 (capacities are checked), so a + b below never wraps
    ends = jax.lax.associative_scan(lambda a, b: jnp.minimum(a + b, cap), per_gauss)
    total_f = jnp.sum(per_gauss.astype(jnp.float32))
    dropped = jnp.clip(total_f - max_pairs, 0.0, float(INT32_MAX - max_pairs))
    return ends, ends[-1], jnp.where(ends[-1] > max_pairs, jnp.maximum(dropped.astype(jnp.int32), 1), 0)


SATURATE_ABOVE = 2**31  # N x tiles from which the pair count saturates (a module constant for tests)


def bin_gaussians(means2d, radii, depths, conics=None, opacities=None, *, width: int, height: int,
                  tile_size: int, max_pairs: int, tile_capacity: int, sub_size: int | None = None) -> TileBins:
    """Tile lists of one image.

    Args:
      means2d [N, 2], radii [N, 2] int32 (0 = culled), depths [N]; optionally conics [N, 3] and
      opacities [N] for the exact Gaussian-tile test (without them: gsplat's bounding boxes only).
      sub_size: if given (a divisor of tile_size), the lists are split into sub-tiles (step 3).
    Returns:
      TileBins over T = tiles_x * tiles_y tiles with M = max_pairs entries, or over T s^2 sub-tiles
      with s^2 M entries (s = tile_size / sub_size).
    """
    n = means2d.shape[0]
    tiles_x, tiles_y = tile_grid(width, height, tile_size)
    num_tiles = tiles_x * tiles_y
    sub_size = tile_size if sub_size is None else sub_size
    s = tile_size // sub_size
    if s * sub_size != tile_size:
        raise ValueError(f"sub-tile size {sub_size} must divide tile_size {tile_size}")
    if s * s * max_pairs >= 2**31 or max_pairs >= 2**30:  # int32 pair and entry indices
        raise ValueError(f"max_pairs={max_pairs:,} with {s * s} sub-tiles per tile passes the int32 index space: "
                         f"lower config.render.max_pairs below {2**31 // max(s * s, 2):,}")
    if s * s > 30:  # one int32 bit mask per pair
        raise ValueError(f"at most 30 sub-tiles per tile, got tile_size {tile_size} / sub-tile size {sub_size}")
    means2d = jax.lax.stop_gradient(means2d)
    depths = jax.lax.stop_gradient(depths)
    visible = jnp.all(radii > 0, axis=-1)

    order = argsort_stable(jnp.where(visible, depths, jnp.inf))
    m, r, vis = means2d[order], radii[order].astype(means2d.dtype), visible[order]
    tmin = jnp.floor((m - r) / tile_size).astype(jnp.int32)
    tmax = jnp.ceil((m + r) / tile_size).astype(jnp.int32)
    lim = jnp.array([tiles_x, tiles_y], jnp.int32)
    tmin = jnp.clip(tmin, 0, lim)
    tmax = jnp.clip(tmax, 0, lim)
    span = tmax - tmin  # [N, 2]
    per_gauss = jnp.where(vis, span[:, 0] * span[:, 1], 0)
    ends, total, dropped = _pair_offsets(per_gauss, max_pairs, num_tiles)  # inclusive running pair count, [N]

    p = jnp.arange(max_pairs, dtype=jnp.int32)
    # Depth rank of pair p's Gaussian = #{g : ends[g] <= p} (a searchsorted, done as scatter + cumsum,
    # which is O(P) instead of O(P log N)).
    owner = jnp.cumsum(jnp.zeros((max_pairs,), jnp.int32).at[ends].add(1, mode="drop"))
    owner_c = jnp.minimum(owner, max(n - 1, 0))
    # Per depth-ordered Gaussian, everything a pair needs, gathered once per pair.
    firsts = jnp.concatenate([jnp.zeros((1,), ends.dtype), ends])[:-1]  # exclusive running count
    ints = jnp.stack([tmin[:, 0], tmin[:, 1], jnp.maximum(span[:, 0], 1), firsts, order], -1)[owner_c]
    local = p - ints[:, 3]
    width_t = ints[:, 2]
    if num_tiles < 2**22:  # float quotient is exact here, and much cheaper than integer division
        ty_local = jnp.floor((local.astype(jnp.float32) + 0.5) / width_t.astype(jnp.float32)).astype(jnp.int32)
    else:
        ty_local = local // width_t
    tx = ints[:, 0] + local - ty_local * width_t
    ty = ints[:, 1] + ty_local
    pair_valid = p < total
    src = ints[:, 4] if n > 0 else jnp.zeros_like(p)
    # Sub-tile j (row-major in the tile) is reached iff bit j of `sub_mask` is set.
    sub_mask = jnp.full((max_pairs,), 2 ** (s * s) - 1, jnp.int32)
    if conics is not None:
        cn = jax.lax.stop_gradient(conics)[order]
        lt = jnp.log(jnp.maximum(jax.lax.stop_gradient(opacities)[order], 1e-30) * 255.0)
        g = jnp.concatenate([m, cn, 1.0 / cn[:, 0:1], 1.0 / cn[:, 2:3], lt[:, None]], -1)[owner_c]  # [P, 8]
        sub_mask = sum(_reaches(g, tx * tile_size + (j % s) * sub_size, ty * tile_size + (j // s) * sub_size,
                                sub_size).astype(jnp.int32) << j
                       for j in range(s * s))
        pair_valid = pair_valid & (sub_mask > 0)
    tile_of_pair = jnp.where(pair_valid, ty * tiles_x + tx, num_tiles)

    # Pairs are already in depth order, so a stable sort on the tile id is gsplat's (tile, depth) sort.
    if (num_tiles + 1) * max_pairs < 2**31:
        # One packed int32 key (tile, pair index): unique keys, so a plain sort is stable; ~5x faster
        # on CPU than a two-operand stable sort.
        key = jax.lax.sort(tile_of_pair * max_pairs + p)
        tile_sorted = key // max_pairs
        gauss_sorted = jnp.where(tile_sorted < num_tiles, src[key % max_pairs], n)
        mask_sorted = sub_mask[key % max_pairs]
    else:
        gauss_of_pair = jnp.where(pair_valid, src, n)
        tile_sorted, gauss_sorted, mask_sorted = jax.lax.sort((tile_of_pair, gauss_of_pair, sub_mask), num_keys=1,
                                                              is_stable=True)
    tiles = jnp.arange(num_tiles, dtype=jnp.int32)
    starts = jnp.searchsorted(tile_sorted, tiles, side="left").astype(jnp.int32)
    stops = jnp.searchsorted(tile_sorted, tiles, side="right").astype(jnp.int32)
    counts = stops - starts
    overflow = jnp.minimum(dropped, INT32_MAX - max_pairs) + jnp.sum(jnp.maximum(counts - tile_capacity, 0))
    bins = TileBins(ids=gauss_sorted.astype(jnp.int32), starts=starts, counts=jnp.minimum(counts, tile_capacity),
                    overflow=overflow.astype(jnp.int32))
    if s == 1:
        return bins
    return _split_tiles(bins, tile_sorted, mask_sorted, s, n)


def _split_tiles(bins: TileBins, tile_sorted, mask_sorted, s: int, n: int) -> TileBins:
    """Sub-tile lists (step 3): tile t's (capacity-cut) list filtered, for each of its s^2 sub-tiles,
    to the entries whose `mask_sorted` bit for that sub-tile is set."""
    m_entries = bins.ids.shape[0]
    num_tiles = bins.starts.shape[0]
    tile = jnp.minimum(tile_sorted, num_tiles - 1)
    in_list = (jnp.arange(m_entries, dtype=jnp.int32) - bins.starts[tile]) < bins.counts[tile]
    in_list = in_list & (tile_sorted < num_tiles)
    bits = jnp.arange(s * s, dtype=jnp.int32)
    reach = (((mask_sorted[:, None] >> bits) & 1) > 0) & in_list[:, None]  # [M, s^2]
    # Rank of an entry within its sub-tile list = reaching entries before it in the same tile.
    csum = jnp.cumsum(reach.astype(jnp.int32), axis=0)  # inclusive, [M, s^2]
    before_tile = jnp.where(bins.starts[:, None] > 0, csum[jnp.maximum(bins.starts - 1, 0)], 0)  # [T, s^2]
    stop = bins.starts + bins.counts
    # An empty tile has no sub-tile entries (its `before_tile` counts earlier tiles' entries only).
    sub_counts = jnp.where(bins.counts[:, None] > 0, csum[jnp.maximum(stop - 1, 0)] - before_tile, 0)
    sub_counts = sub_counts.reshape(-1)  # [T s^2], sub-tile j of tile t at t s^2 + j
    sub_starts = (jnp.cumsum(sub_counts) - sub_counts).astype(jnp.int32)
    pos = sub_starts.reshape(num_tiles, s * s)[tile] + csum - 1 - before_tile[tile]  # [M, s^2]
    pos = jnp.where(reach, pos, s * s * m_entries)  # out of range: dropped
    ids = jnp.full((s * s * m_entries,), n, jnp.int32).at[pos.reshape(-1)].set(
        jnp.broadcast_to(bins.ids[:, None], pos.shape).reshape(-1), mode="drop", unique_indices=True)
    return TileBins(ids=ids, starts=sub_starts, counts=sub_counts.astype(jnp.int32), overflow=bins.overflow)
