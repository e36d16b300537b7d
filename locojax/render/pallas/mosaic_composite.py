"""Tile compositing as Pallas Mosaic TPU kernels: `composite_tiles_mosaic`, forward and custom VJP.

Same contract as `locojax.render.composite.composite_tiles` (gsplat `RasterizeToPixels3DGSFwd.cu`):
alpha = min(0.999, o exp(-sigma)), entries with sigma < 0 or alpha < 1/255 skipped, an entry used
iff the transmittance after it stays above 1e-4 (gsplat's exclusive stop), row N of the table an
opacity-0 sentinel; differentiable w.r.t. `table` only.

TPU design (docs/rasterizer_backends.md, design note section 5.11):
- XLA gathers the listed attributes lane-dense, each row's list padded to whole chunks of B = 128k
  entries (`mosaic_layout`): TensorCores cannot gather from a ref with a vector of indices.
- One program per row (a sub-tile of P pixels), grid dimension "parallel". The row's first chunk and
  chunk count are scalar-prefetched into SMEM; a `while_loop` inside the kernel walks the chunks with
  double-buffered DMAs from HBM (the ragged paged attention pattern) and stops once every in-image
  pixel is saturated, like gsplat's block vote: trip counts live on the device, no host sync.
- A chunk is evaluated as one [P, B] tile (pixels on sublanes, entries on lanes). Transmittance is a
  prefix product along lanes (log2(B) `pltpu.roll` steps, Hillis-Steele), colour sums are lane
  reductions: no matmul, so no bf16 MXU passes to worry about.
- Backward: the same walk recomputes alpha and T and uses composite.py's division-free closed form
  (suffix = total - prefix); it writes one gradient per list slot and XLA segment-sums them into
  the table (no TensorCore atomics).
Per-pixel state is kept lane-replicated as [P, B] (as the TPU flash attention kernel keeps its row
statistics 128 lanes wide) rather than as [P, 1] columns.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from locojax.render.composite import T_STOP
from locojax.render.pallas.mosaic_layout import (ATTR_ROWS, chunk_layout, chunk_lanes, gather_chunks,
                                                 scatter_chunks, total_chunks)
from locojax.render.projection import ALPHA_THRESHOLD

# Columns of the per-row [P, OUT_COLS] blocks: r, g, b, z sums then final T (forward); the four
# colour cotangents, sum_c g_c rgbz_c and g_T T_final (backward input).
OUT_COLS = 8
# Rows per kernel call. Each call scalar-prefetches 4 int32 per row into SMEM (1 MiB up to v6e):
# 16384 rows take 256 KiB, and larger batches (tokengs_4096: 256 images x 4096 sub-tiles) are
# split into several calls instead of overflowing it.
ROWS_PER_CALL = 16384


def _lane(shape):
    return jax.lax.broadcasted_iota(jnp.int32, shape, 1)


def _prefix(x, op, identity):
    """Inclusive scan of x [P, B] along lanes (Hillis-Steele: log2 B rotations; Mosaic has no scan)."""
    lane = _lane(x.shape)
    shift = 1
    while shift < x.shape[1]:
        x = op(x, jnp.where(lane >= shift, pltpu.roll(x, shift, 1), identity))
        shift *= 2
    return x


def _shift_in(x, first):
    """Exclusive version of an inclusive lane scan x [P, B]: lane 0 gets `first`."""
    return jnp.where(_lane(x.shape) == 0, first, pltpu.roll(x, 1, 1))


def _lane_sum(x):
    """Sum over lanes of x [P, B], kept lane-replicated [P, B]."""
    return jnp.broadcast_to(jnp.sum(x, axis=1, keepdims=True), x.shape)


def _last_lane(x):
    """Lane B - 1 of x [P, B], replicated over the lanes (an exact select, not a product)."""
    return _lane_sum(jnp.where(_lane(x.shape) == x.shape[1] - 1, x, 0.0))


def _column(block, c, lanes):
    """Column c of a [P, OUT_COLS] block, replicated to [P, lanes]."""
    col = jnp.sum(jnp.where(_lane(block.shape) == c, block, 0.0), axis=1, keepdims=True)
    return jnp.broadcast_to(col, (block.shape[0], lanes))


def _eval_chunk(buf, slot, ox, oy, lx, ly, t_carry):
    """Alphas and transmittances of one chunk tile buf[slot] [ATTR_ROWS, B] at the row's pixels.

    lx, ly: tile-local pixel centres [P, B]; ox, oy: tile origin [P, B]; t_carry: T before the chunk.
    Rows of the tile are read one sublane at a time and broadcast over the pixels.
    """
    attr = lambda i: buf[slot, pl.ds(i, 1), :]  # [1, B]
    mx = attr(0) - ox  # tile-local mean, as composite._tile_geometry
    my = attr(1) - oy
    dx = mx - lx
    dy = my - ly
    ca, cb, cc, op = attr(2), attr(3), attr(4), attr(5)
    sigma = 0.5 * (ca * dx * dx + cc * dy * dy) + cb * dx * dy
    raw = op * jnp.exp(-sigma)
    alpha = jnp.minimum(0.999, raw)
    valid = (sigma >= 0.0) & (alpha >= ALPHA_THRESHOLD)
    one_minus = jnp.where(valid, 1.0 - alpha, 1.0)
    incl = _prefix(one_minus, jnp.multiply, 1.0)
    t_incl = t_carry * incl
    t_before = t_carry * _shift_in(incl, 1.0)
    used = valid & (t_incl > T_STOP)
    return dict(attr=attr, mx=mx, my=my, dx=dx, dy=dy, raw=raw, alpha=alpha, t_incl=t_incl,
                t_before=t_before, used=used)


def _walk_chunks(attrs_hbm, buf, sems, c0, n, alive, step, carry):
    """Run `step(slot, carry)` over chunks c0 .. c0 + n - 1 of attrs_hbm [K, ATTR_ROWS, B] while
    `alive(carry)`, with the next chunk's DMA in flight during each step (double buffering).

    Returns (chunks processed, final carry). A prefetch left in flight by an early stop is awaited.
    """
    copy = lambda k, slot: pltpu.make_async_copy(attrs_hbm.at[c0 + k], buf.at[slot], sems.at[slot])

    @pl.when(n > 0)
    def _():
        copy(0, 0).start()

    def cond(c):
        k, go, _ = c
        return go & (k < n)

    def body(c):
        k, _, inner = c
        slot = k % 2
        copy(k, slot).wait()

        @pl.when(k + 1 < n)
        def _():
            copy(k + 1, 1 - slot).start()

        inner = step(slot, inner)
        return k + 1, alive(inner), inner

    k, _, carry = jax.lax.while_loop(cond, body, (jnp.int32(0), alive(carry), carry))

    @pl.when(k < n)
    def _():
        copy(k, k % 2).wait()

    return k, carry


def _row_geometry(geom_ref, ox_ref, oy_ref, r, width, height):
    lx, ly = geom_ref[0], geom_ref[1]  # [P, B]
    ox = jnp.full(lx.shape, ox_ref[r], jnp.int32).astype(jnp.float32)
    oy = jnp.full(lx.shape, oy_ref[r], jnp.int32).astype(jnp.float32)
    inside = (ox + lx < width) & (oy + ly < height)
    return lx, ly, ox, oy, inside


def _alive(inside):
    return lambda c: jnp.any((c[0] > T_STOP) & inside)


def _forward_kernel(cstart_ref, nch_ref, ox_ref, oy_ref, geom_ref, attrs_hbm, out_ref, buf, sems, *,
                    width, height):
    r = pl.program_id(0)
    lx, ly, ox, oy, inside = _row_geometry(geom_ref, ox_ref, oy_ref, r, width, height)

    def step(slot, c):
        t_all, t_used, acc = c
        e = _eval_chunk(buf, slot, ox, oy, lx, ly, t_all)
        w = jnp.where(e["used"], e["alpha"] * e["t_before"], 0.0)
        acc = tuple(a + _lane_sum(w * e["attr"](6 + i)) for i, a in enumerate(acc))
        # T after the last used entry (T only decreases along the list).
        t_used = jnp.minimum(t_used, jnp.min(jnp.where(e["used"], e["t_incl"], 1.0), axis=1, keepdims=True))
        return _last_lane(e["t_incl"]), t_used, acc

    ones = jnp.ones(lx.shape, jnp.float32)
    zeros = jnp.zeros(lx.shape, jnp.float32)
    _, (_, t_used, acc) = _walk_chunks(attrs_hbm, buf, sems, cstart_ref[r], nch_ref[r], _alive(inside), step,
                                       (ones, ones, (zeros,) * 4))
    lane = _lane(lx.shape)
    out = jnp.where(lane == 4, t_used, 0.0)
    for i, a in enumerate(acc):
        out = jnp.where(lane == i, a, out)
    out_ref[0] = out[:, :OUT_COLS]


def _backward_kernel(cstart_ref, nch_ref, ox_ref, oy_ref, geom_ref, gin_ref, attrs_hbm, grads_in_hbm, grads_hbm,
                     buf, gbuf, sems, out_sem, *, width, height):
    del grads_in_hbm  # aliased to grads_hbm: the calls for earlier row groups wrote their chunks there
    r = pl.program_id(0)
    lx, ly, ox, oy, inside = _row_geometry(geom_ref, ox_ref, oy_ref, r, width, height)
    lanes = lx.shape[1]
    gin = gin_ref[0]  # [P, OUT_COLS]
    g_col = [_column(gin, i, lanes) for i in range(4)]
    g_total, g_tt = _column(gin, 4, lanes), _column(gin, 5, lanes)
    c0, n = cstart_ref[r], nch_ref[r]
    sub = jax.lax.broadcasted_iota(jnp.int32, (ATTR_ROWS, lanes), 0)

    def write(k):
        out = pltpu.make_async_copy(gbuf, grads_hbm.at[c0 + k], out_sem)
        out.start()
        out.wait()

    def step(slot, c):
        t_all, g_prefix, k = c
        e = _eval_chunk(buf, slot, ox, oy, lx, ly, t_all)
        attr, alpha, used = e["attr"], e["alpha"], e["used"]
        w = jnp.where(used, alpha * e["t_before"], 0.0)
        v = sum(g_col[i] * attr(6 + i) for i in range(4))  # <g_rgb, c_i> + g_z z_i
        g_incl = g_prefix + _prefix(w * v, jnp.add, 0.0)
        suffix = g_total - g_incl
        g_alpha = e["t_before"] * v - (suffix + g_tt) / (1.0 - alpha)
        g_alpha = jnp.where(used & (e["raw"] < 0.999), g_alpha, 0.0)
        g_sigma = -g_alpha * alpha
        dx, dy = e["dx"], e["dy"]
        psum = lambda x: jnp.sum(x, axis=0, keepdims=True)  # over the row's pixels -> [1, B]
        s0, s_dx, s_dy = psum(g_sigma), psum(g_sigma * dx), psum(g_sigma * dy)
        s_dxx, s_dyy, s_dxy = psum(g_sigma * dx * dx), psum(g_sigma * dy * dy), psum(g_sigma * dx * dy)
        ca, cb, cc, op = attr(2), attr(3), attr(4), attr(5)
        # dL/do = sum_p g_alpha exp(-sigma) = -s0 / o, as composite._bwd_block (g_alpha is 0 where
        # alpha was clamped).
        g_op = jnp.where(op > 0.0, -s0 / jnp.where(op > 0.0, op, 1.0), 0.0)
        rows = [ca * s_dx + cb * s_dy, cc * s_dy + cb * s_dx, 0.5 * s_dxx, s_dxy, 0.5 * s_dyy, g_op]
        rows += [psum(w * g_col[i]) for i in range(4)]
        tile = jnp.zeros((ATTR_ROWS, lanes), jnp.float32)
        for i, row in enumerate(rows):
            tile = jnp.where(sub == i, row, tile)
        gbuf[...] = tile
        write(k)
        return _last_lane(e["t_incl"]), _last_lane(g_incl), k + 1

    ones = jnp.ones(lx.shape, jnp.float32)
    k_done, _ = _walk_chunks(attrs_hbm, buf, sems, c0, n, _alive(inside), step,
                             (ones, jnp.zeros_like(ones), jnp.int32(0)))
    # Chunks after saturation contribute nothing: zeros, so every slot of the row is written.
    gbuf[...] = jnp.zeros((ATTR_ROWS, lanes), jnp.float32)
    jax.lax.fori_loop(k_done, n, lambda k, _: write(k), None)


def _pixel_geometry(tile_size: int, lanes: int):
    """Tile-local pixel centres, lane-replicated: [2, P, lanes] (x, y), pixels row-major."""
    ly, lx = jnp.divmod(jnp.arange(tile_size * tile_size, dtype=jnp.int32), tile_size)
    xy = jnp.stack([lx, ly]).astype(jnp.float32) + 0.5
    return jnp.broadcast_to(xy[:, :, None], xy.shape + (lanes,))


def _row_groups(num_rows: int):
    """Row ranges of the kernel calls: every call prefetches 4 int32 scalars per row into SMEM."""
    return [(r0, min(num_rows, r0 + ROWS_PER_CALL)) for r0 in range(0, num_rows, ROWS_PER_CALL)]


def _row_scalars(layout, origins, r0, r1):
    return (layout.chunk_start[r0:r1], layout.num_chunks[r0:r1], origins[r0:r1, 0].astype(jnp.int32),
            origins[r0:r1, 1].astype(jnp.int32))


def _forward(table, origins, layout, *, tile_size, width, height, lanes, interpret):
    num_rows, npix = origins.shape[0], tile_size * tile_size
    attrs = gather_chunks(table, layout.src, lanes)
    geom = _pixel_geometry(tile_size, lanes)
    outs = []
    for r0, r1 in _row_groups(num_rows):
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4,
            grid=(r1 - r0,),
            in_specs=[pl.BlockSpec(geom.shape, lambda r, *_: (0, 0, 0)), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((1, npix, OUT_COLS), lambda r, *_: (r, 0, 0)),
            scratch_shapes=[pltpu.VMEM((2, ATTR_ROWS, lanes), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
        )
        outs.append(pl.pallas_call(
            partial(_forward_kernel, width=width, height=height),
            out_shape=jax.ShapeDtypeStruct((r1 - r0, npix, OUT_COLS), jnp.float32),
            grid_spec=grid_spec,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
            interpret=interpret,
            name="locojax_composite_fwd",
        )(*_row_scalars(layout, origins, r0, r1), geom, attrs))
    out = outs[0] if len(outs) == 1 else jnp.concatenate(outs, 0)
    return jnp.moveaxis(out[..., :4], -1, 0), out[..., 4]


def _backward(table, origins, layout, rgbz, t_final, g_rgbz, g_t, *, tile_size, width, height, lanes,
              interpret):
    num_rows, npix = origins.shape[0], tile_size * tile_size
    attrs = gather_chunks(table, layout.src, lanes)
    geom = _pixel_geometry(tile_size, lanes)
    g_total = jnp.sum(g_rgbz * rgbz, 0)  # sum_i w_i v_i per pixel, [R, P]
    gin = jnp.concatenate([jnp.moveaxis(g_rgbz, 0, -1), g_total[..., None], (g_t * t_final)[..., None],
                           jnp.zeros((num_rows, npix, OUT_COLS - 6), jnp.float32)], -1).astype(jnp.float32)
    partials = jnp.zeros(attrs.shape, jnp.float32)
    for r0, r1 in _row_groups(num_rows):
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4,
            grid=(r1 - r0,),
            in_specs=[pl.BlockSpec(geom.shape, lambda r, *_: (0, 0, 0)),
                      pl.BlockSpec((1, npix, OUT_COLS), lambda r, *_: (r, 0, 0)),
                      pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((2, ATTR_ROWS, lanes), jnp.float32),
                            pltpu.VMEM((ATTR_ROWS, lanes), jnp.float32),
                            pltpu.SemaphoreType.DMA((2,)), pltpu.SemaphoreType.DMA(())],
        )
        partials = pl.pallas_call(
            partial(_backward_kernel, width=width, height=height),
            out_shape=jax.ShapeDtypeStruct(attrs.shape, jnp.float32),
            grid_spec=grid_spec,
            input_output_aliases={7: 0},  # partials: 4 scalar operands, geom, gin, attrs, partials
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
            interpret=interpret,
            name="locojax_composite_bwd",
        )(*_row_scalars(layout, origins, r0, r1), geom, gin[r0:r1], attrs, partials)
    return scatter_chunks(partials, layout, table.shape[0], table.shape[1])


def _layout(table, ids, starts, limits, chunk):
    lanes = chunk_lanes(chunk)
    return chunk_layout(ids.astype(jnp.int32), starts.astype(jnp.int32), limits.astype(jnp.int32),
                        table.shape[0] - 1, lanes), lanes


@partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7, 8, 9))
def _composite(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret):
    layout, lanes = _layout(table, ids, starts, limits, chunk)
    return _forward(table, origins, layout, tile_size=tile_size, width=width, height=height, lanes=lanes,
                    interpret=interpret)


def _composite_fwd(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret):
    layout, lanes = _layout(table, ids, starts, limits, chunk)
    out = _forward(table, origins, layout, tile_size=tile_size, width=width, height=height, lanes=lanes,
                   interpret=interpret)
    return out, (table, ids, starts, limits, origins, layout, out)


def _composite_bwd(tile_size, width, height, chunk, interpret, res, cts):
    table, ids, starts, limits, origins, layout, (rgbz, t_final) = res
    g_rgbz, g_t = cts
    grad = _backward(table, origins, layout, rgbz, t_final, g_rgbz, g_t, tile_size=tile_size, width=width,
                     height=height, lanes=chunk_lanes(chunk), interpret=interpret)
    return grad.astype(table.dtype), None, None, None, None


_composite.defvjp(_composite_fwd, _composite_bwd)


def mosaic_fits(num_entries: int, num_rows: int, chunk: int) -> bool:
    """Whether the padded chunk layout of M = num_entries list entries in R = num_rows rows (M + up
    to 128 R slots) stays inside the kernels' int32 slot index space."""
    lanes = chunk_lanes(chunk)
    return total_chunks(num_entries, num_rows, lanes) * lanes < 2**31


def composite_tiles_mosaic(table, ids, starts, limits, origins, tile_size, width, height, chunk, *,
                           interpret=False):
    """Blend tile lists with the Mosaic TPU kernels (contract of `composite.composite_tiles`).

    Args:
      table: [N + 1, 10] packed attributes (last row: an opacity-0 sentinel).
      ids: [M] int32 Gaussian ids; row r's list is ids[starts[r] : starts[r] + limits[r]], nearest
        first. The rows' lists must be disjoint slices (sum(limits) <= M), as `bin_gaussians` makes
        them: the padded chunk layout is sized from that bound.
      starts, limits: [R] int32 (R = images x tiles).
      origins: [R, 2] int32 pixel (x, y) of each row's tile (pixels outside width x height ignored).
      tile_size, width, height: static.
      chunk: static; entries per kernel step, rounded up to whole 128-lane vregs (16 -> 128).
      interpret: False on TPU; True (or a `pltpu.InterpretParams`) runs the kernels in Pallas's
        interpreter on any backend (tests on CPU).
    Returns:
      rgbz [4, R, P] (r, g, b without background, then accumulated z), final transmittance [R, P];
      P = tile_size**2, pixels row-major within the tile. Differentiable w.r.t. `table`.
    """
    if not mosaic_fits(ids.shape[0], starts.shape[0], chunk):
        raise ValueError(
            f"Mosaic compositing: {ids.shape[0]:,} list entries in {starts.shape[0]:,} rows pad past the "
            f"int32 slot index space (2^31); lower config.render.max_pairs or use "
            f"config.render.backend='xla'")
    return _composite(table, ids, starts, limits, origins, int(tile_size), int(width), int(height), int(chunk),
                      interpret)
