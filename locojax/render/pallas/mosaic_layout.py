"""Chunked, lane-dense list layout for the Mosaic TPU compositing kernels (XLA side).

TPU TensorCores cannot gather from a ref with a vector of indices (Mosaic raises "Cannot do int
indexing on TPU"), so the per-entry attributes are gathered here, in XLA, in list order. Every row's
list is padded to whole chunks of `lanes` entries (a multiple of the 128-lane vreg width), so that a
kernel reads one row chunk as one aligned [16, lanes] tile by DMA and walks its rows with scalar
chunk offsets from SMEM (the ragged paged attention pattern, jax ops/tpu/ragged_paged_attention).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# Rows of a chunk tile: the 10 packed attributes (composite.NUM_ATTRS) padded to a multiple of the
# 8 sublanes of a vreg.
ATTR_ROWS = 16
LANES = 128


class ChunkLayout(NamedTuple):
    """Where each row's padded list lives.

    src [K * B] int32: table row of every slot (the sentinel for padding); valid [K * B] bool: slot
    holds a listed entry; chunk_start [R] int32: first chunk of each row; num_chunks [R] int32.
    """

    src: jax.Array
    valid: jax.Array
    chunk_start: jax.Array
    num_chunks: jax.Array


def chunk_lanes(chunk: int) -> int:
    """Entries per kernel chunk: `chunk` rounded up to whole 128-lane vregs."""
    return LANES * max(1, -(-int(chunk) // LANES))


def total_chunks(num_entries: int, num_rows: int, lanes: int) -> int:
    """Static chunk capacity: the entries in whole chunks plus at most one partial chunk per row.

    Exact bound when the rows' lists are disjoint slices of `ids` (sum of limits <= M), which is
    what `bin_gaussians` produces.
    """
    return -(-int(num_entries) // lanes) + int(num_rows)


def chunk_layout(ids, starts, limits, sentinel: int, lanes: int) -> ChunkLayout:
    """Pad every row's list ids[starts[r] : starts[r] + limits[r]] to whole chunks of `lanes` slots.

    Args:
      ids: [M] int32; starts, limits: [R] int32 (disjoint lists, sum(limits) <= M).
      sentinel: table row used for padding (opacity 0).
      lanes: entries per chunk (a multiple of 128).
    Returns:
      ChunkLayout with K = total_chunks(M, R, lanes) chunks.
    """
    num_rows, num_entries = starts.shape[0], ids.shape[0]
    k_total = total_chunks(num_entries, num_rows, lanes)
    limits = jnp.maximum(limits, 0)
    want = -(-limits // lanes)
    chunk_start = (jnp.cumsum(want) - want).astype(jnp.int32)
    # Rows past the static capacity (only possible if lists overlap) are cut, never read out of bounds.
    num_chunks = jnp.clip(k_total - chunk_start, 0, want).astype(jnp.int32)
    # Owner row of each chunk: the last row starting at or before it (empty rows start where the
    # next row does and come first, so the owner is the non-empty one).
    marks = jnp.zeros((k_total,), jnp.int32).at[chunk_start].add(1, mode="drop")
    owner = jnp.clip(jnp.cumsum(marks) - 1, 0, num_rows - 1)  # [K]
    slot = jnp.arange(k_total * lanes, dtype=jnp.int32)
    chunk = slot // lanes
    row = owner[chunk]
    offset = (chunk - chunk_start[row]) * lanes + slot % lanes
    valid = (offset < limits[row]) & (chunk < chunk_start[row] + num_chunks[row])
    pos = jnp.clip(starts[row] + offset, 0, num_entries - 1)
    src = jnp.where(valid, ids[pos], sentinel).astype(jnp.int32)
    return ChunkLayout(src=src, valid=valid, chunk_start=chunk_start, num_chunks=num_chunks)


def gather_chunks(table, src, lanes: int):
    """table [N + 1, A] rows in slot order -> lane-dense chunk tiles [K, ATTR_ROWS, lanes] f32."""
    a = jnp.take(table, src, axis=0).astype(jnp.float32)  # [K * lanes, A]
    a = jnp.pad(a, ((0, 0), (0, ATTR_ROWS - a.shape[1])))
    return jnp.transpose(a.reshape(-1, lanes, ATTR_ROWS), (0, 2, 1))


def scatter_chunks(partials, layout: ChunkLayout, num_table_rows: int, num_attrs: int):
    """Per-slot gradients [K, ATTR_ROWS, lanes] -> per-table-row sums [N + 1, num_attrs].

    TensorCores have no atomics, so the kernels write one gradient per list slot and XLA reduces them
    here (the per-slot partial + segment-sum design of ghif/jax-gs and imgengineer/jax-gs). Slots the
    kernel never wrote (tail chunks) are masked, not trusted.
    """
    g = jnp.transpose(partials, (0, 2, 1)).reshape(-1, ATTR_ROWS)[:, :num_attrs]
    g = jnp.where(layout.valid[:, None], g, 0.0)
    return jax.ops.segment_sum(g, layout.src, num_segments=num_table_rows)
