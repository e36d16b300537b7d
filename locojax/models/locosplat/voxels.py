"""Static-shape voxel group-by and the binned local average of LoCoSplat (paper secs. 2.2-2.3, B.1).

Everything works on ONE scene of N points (vmap over the batch); every output has N rows (or a
scalar), whatever the scene's occupancy, so the encoder compiles once (paper B.1 "Deployed inference
stack": "an exact sort-based voxel group-by padded to a static B*V*H*W row count").

    keys, overflow = voxel_keys(x [N, 3], cell)             # rnd(x / cell), round half to even
    grouping = group_by_voxel(keys)                         # point -> anchor row, rows sorted by key
    mean = segment_mean(values [N, C], grouping)            # per-row mean, 0 on dead rows
    u = cell_average(points [N, 3], values [N, C], queries [M, 3], cell)   # eqs. 2-3 box kernel
    u = trilinear_cell_average(points, values, queries, cell)  # tent kernel (Table 5 fine-level ablation)

Keys are sorted lexicographically on their three int32 coordinates (`lax.sort` with 3 keys) rather
than packed into one integer: a packed int32 key has 10 bits per axis, i.e. 1,024 voxels = 1.02 m at
v = 0.001, and an RE10K scene spans up to 2 x far = 200 m = 2e5 voxels (18 bits) per axis; three
int32 keys hold +-2^30 voxels (+-1,073 km at v = 0.001) per axis. Coordinates beyond that (or
non-finite ones) are clamped and COUNTED (`overflow`), never silently merged.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

KEY_LIMIT = 2 ** 30  # |rnd(x / cell)| must stay below this (int32 with headroom), else counted


def voxel_keys(x, cell: float):
    """x [..., 3] float32 -> (keys [..., 3] int32 = rnd(x / cell) (round half to even, as torch.round,
    eq. 1), overflow [] int32 = number of points with a coordinate outside +-KEY_LIMIT cells or not
    finite; those are clamped to +-KEY_LIMIT (a shared sentinel cell))."""
    q = jnp.round(jax.lax.stop_gradient(x).astype(jnp.float32) / jnp.float32(cell))
    ok = jnp.all(jnp.abs(q) < KEY_LIMIT, axis=-1, keepdims=True)  # False for NaN too
    overflow = jnp.sum(~ok).astype(jnp.int32)
    q = jnp.where(ok, q, KEY_LIMIT)  # the whole point goes to the one sentinel cell
    return q.astype(jnp.int32), overflow


class Grouping(NamedTuple):
    """A static group-by of N points into N rows.

    segment: [N] int32, the row of each point; rows are numbered in lexicographic key order.
    count:   [N] int32, points per row (0: dead row; live rows are exactly 0 .. num_rows - 1).
    num_rows: [] int32, occupied voxels (anchors).
    """

    segment: jax.Array
    count: jax.Array
    num_rows: jax.Array


def _sorted_segments(keys, *extra_operands):
    """Sort rows by the 3 int32 key columns; returns (segment id of each input row, number of
    segments, sorted extra operands). Segment ids count distinct keys in sorted order."""
    n = keys.shape[0]
    iota = jnp.arange(n, dtype=jnp.int32)
    out = jax.lax.sort((keys[:, 0], keys[:, 1], keys[:, 2], iota) + tuple(extra_operands), num_keys=3)
    sk, perm = jnp.stack(out[:3], -1), out[3]
    new = jnp.concatenate([jnp.ones((1,), bool), jnp.any(sk[1:] != sk[:-1], axis=-1)])
    seg_sorted = jnp.cumsum(new.astype(jnp.int32)) - 1
    segment = jnp.zeros((n,), jnp.int32).at[perm].set(seg_sorted)
    return segment, seg_sorted[-1] + 1, out[4:]


def group_by_voxel(keys) -> Grouping:
    """keys [N, 3] int32 -> Grouping (exact: a row per distinct key)."""
    n = keys.shape[0]
    segment, num_rows, _ = _sorted_segments(keys)
    count = jax.ops.segment_sum(jnp.ones((n,), jnp.int32), segment, num_segments=n)
    return Grouping(segment, count, num_rows.astype(jnp.int32))


def segment_mean(values, grouping: Grouping):
    """values [N, C] -> [N, C] per-row means (rows of `grouping`); dead rows are 0. Differentiable
    in `values` (the group-by itself is not: keys come from rounded, gradient-stopped positions)."""
    n = values.shape[0]
    total = jax.ops.segment_sum(values, grouping.segment, num_segments=n)
    denom = jnp.maximum(grouping.count, 1).astype(values.dtype)[:, None]
    return total / denom


def cell_average(points, values, queries, cell: float):
    """Box-kernel binned average (eqs. 2-3): u(c) = mean of values[i] over points i with
    rnd(points[i] / cell) = c, read at rnd(queries[j] / cell); 0 where the query's cell holds no point.

    points [N, 3], values [N, C], queries [M, 3] -> (u [M, C], overflow [] int32).

    One static sort of N + M keys: queries join the segment of their cell with zero weight, so a
    cell holding only queries averages to 0 (eq. 4: u1(c) = 0 for empty cells).
    """
    n, m = points.shape[0], queries.shape[0]
    kp, ov_p = voxel_keys(points, cell)
    kq, ov_q = voxel_keys(queries, cell)
    keys = jnp.concatenate([kp, kq], axis=0)
    segment, _, _ = _sorted_segments(keys)
    weight = jnp.concatenate([jnp.ones((n,), values.dtype), jnp.zeros((m,), values.dtype)])
    padded = jnp.concatenate([values, jnp.zeros((m, values.shape[1]), values.dtype)], axis=0)
    total = jax.ops.segment_sum(padded, segment, num_segments=n + m)
    count = jax.ops.segment_sum(weight, segment, num_segments=n + m)
    mean = total / jnp.maximum(count, 1.0)[:, None]
    return mean[segment[n:]], ov_p + ov_q


# The 8 corners of a cell, as offsets from its floor corner: (0,0,0), (0,0,1), ..., (1,1,1).
CORNER_OFFSETS = jnp.array([[(i >> 2) & 1, (i >> 1) & 1, i & 1] for i in range(8)], jnp.int32)


def trilinear_corners(x, cell: float):
    """Tent-kernel (trilinear) weights of each point on the 8 grid nodes around it.

    Nodes sit at integer multiples of `cell` (node c at c * cell, the same nodes as the box kernel's
    rnd(x / cell)). x [..., 3] -> (keys [..., 8, 3] int32, weights [..., 8] summing to 1 per point,
    overflow [] int32 = points with a coordinate outside +-(KEY_LIMIT - 1) cells or not finite; those
    are counted and put, with weight 1, on one sentinel node, as `voxel_keys` does). The weights, like
    the keys, are computed from gradient-stopped positions (the grouping is not differentiated).
    """
    s = jax.lax.stop_gradient(x).astype(jnp.float32) / jnp.float32(cell)
    base = jnp.floor(s)
    ok = jnp.all(jnp.abs(base) < KEY_LIMIT - 1, axis=-1, keepdims=True)  # False for NaN too
    overflow = jnp.sum(~ok).astype(jnp.int32)
    frac = jnp.where(ok, s - base, 0.0)
    base = jnp.where(ok, base, KEY_LIMIT).astype(jnp.int32)
    keys = base[..., None, :] + CORNER_OFFSETS  # [..., 8, 3]
    upper = CORNER_OFFSETS.astype(bool)
    weights = jnp.prod(jnp.where(upper, frac[..., None, :], 1.0 - frac[..., None, :]), axis=-1)
    return keys, weights, overflow


def trilinear_cell_average(points, values, queries, cell: float):
    """Tent-kernel binned average (paper B.1 "Grids", the ablation models' rule): every point splats
    to its 8 surrounding nodes with trilinear weights and each node stores the weight-normalised mean
    sum_i w_i values_i / sum_i w_i ("weight-normalized trilinear splatting"); each query reads its 8
    nodes trilinearly, "renormalized over occupied corners" (nodes with sum_i w_i > 0); 0 where none is.

    points [N, 3], values [N, C], queries [M, 3] -> (u [M, C], overflow [] int32).

    Static shapes: one sort of 8 (N + M) corner keys into as many rows (every corner has its own row,
    so no node can be dropped: exact at any occupancy); queries' corners join with zero weight.
    """
    n, m, c = points.shape[0], queries.shape[0], values.shape[1]
    kp, wp, ov_p = trilinear_corners(points, cell)
    kq, wq, ov_q = trilinear_corners(queries, cell)
    keys = jnp.concatenate([kp.reshape(8 * n, 3), kq.reshape(8 * m, 3)], axis=0)
    segment, _, _ = _sorted_segments(keys)
    rows = 8 * (n + m)
    wp = wp.astype(values.dtype)
    weight = jnp.concatenate([wp.reshape(8 * n), jnp.zeros((8 * m,), values.dtype)])
    splat = jnp.concatenate([(wp[:, :, None] * values[:, None, :]).reshape(8 * n, c),
                             jnp.zeros((8 * m, c), values.dtype)], axis=0)
    wsum = jax.ops.segment_sum(weight, segment, num_segments=rows)
    vsum = jax.ops.segment_sum(splat, segment, num_segments=rows)
    occupied = wsum > 0
    node = jnp.where(occupied[:, None], vsum / jnp.where(occupied, wsum, 1.0)[:, None], 0.0)
    qseg = segment[8 * n:].reshape(m, 8)
    qw = wq.astype(values.dtype) * occupied[qseg]  # renormalise over occupied corners
    total = jnp.sum(qw, axis=-1)
    u = jnp.sum(qw[..., None] * node[qseg], axis=1) / jnp.where(total > 0, total, 1.0)[:, None]
    return jnp.where((total > 0)[:, None], u, 0.0), ov_p + ov_q
