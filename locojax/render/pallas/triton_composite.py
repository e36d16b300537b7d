"""Tile compositing as Pallas Triton kernels (GPU), forward and backward, with the contract of
`locojax.render.composite.composite_tiles`.

Layout as gsplat's `rasterize_to_pixels` (RasterizeToPixels3DGSFwd.cu / Bwd.cu, v1.5.3): one
program per (sub-)tile row holding all of its pixels as one vector; the program walks its
depth-sorted list in chunks of `chunk` entries inside the kernel (a data-dependent `while_loop`
lowered to scf.while, so no host synchronisation), and stops once every pixel of the tile is
saturated (T would fall to 1e-4 or below) or the list is exhausted, like gsplat's block-wide
`__syncthreads_count` exit.

Forward per pixel (gsplat): alpha = min(0.999, o exp(-sigma)); an entry is skipped if sigma < 0 or
alpha < 1/255; the pixel stops, exclusively, at the first entry with T (1 - alpha) <= 1e-4. The
forward also stores, per pixel, `count` = 1 + the list position of the last entry used (gsplat's
`last_ids`, counted from the row's start).

Backward: the division-free front-to-back walk of the XLA path (composite.py): suffix sums are
total - prefix, and an entry is "used" iff it is valid and before the pixel's `count`, so forward
and backward agree on which entries contributed even where FMA contraction differs. Each program
walks up to the maximum count of its pixels (gsplat's `warp_bin_final`), reduces each entry's 10
gradient components over its pixels and adds them into a zero-initialised [(N + 1) * 16] buffer
with one `atomic_add` of 16 distinct addresses per (program, entry), as gsplat's per-warp
`gpuAtomicAdd`. Per-entry partials reduced by `segment_sum` outside were the alternative; at the
default capacities they need [M, 16] floats (~0.5 GB per 256x256 image), hence atomics. The Pallas
interpreter discharges an atomic as a read-modify-write of the whole index vector, which is
correct as long as one call's indices are distinct (they are: 16 columns of one row) and the grid
runs sequentially (it does in interpret mode); so interpret-mode results are exact sums in program
order, while on a GPU the summation order is nondeterministic, as in gsplat.

Triton rules honoured here (jax/_src/pallas/triton/lowering.py, jax 0.10.2): every array value has
a power-of-2 size (pixels are padded to the next power of 2 and masked), no value slicing or
gathers (attributes are scalar ref loads), no any/all (max over int32), no reverse scans, atomics
without `mask=` (the interpreter rejects masks), every pointer index clamped in range.

Requires jax >= 0.9.1: earlier GPU Pallas had no `triton.CompilerParams` routing (jax
docs/pallas/CHANGELOG.md); without the Triton compiler params, jax >= 0.9 lowers GPU Pallas to
Mosaic GPU, which rejects these kernels.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from locojax.render.projection import ALPHA_THRESHOLD

T_STOP = 1e-4
NUM_ATTRS = 10
# Table row stride of the kernels: 16 floats (64-byte rows, power of 2 for the atomic vector).
ROW = 16
# Triton launch parameters: 2 warps = 64 threads, one pixel per thread at 8 x 8 sub-tiles (gsplat
# runs one thread per pixel); one pipeline stage since the loop body is scalar loads, not tiles.
NUM_WARPS = 2
NUM_STAGES = 1
MIN_JAX = (0, 9, 1)


def _program_id(axis):
    from jax.experimental import pallas as pl
    return pl.program_id(axis)


def _jax_version() -> tuple:
    parts = []
    for p in jax.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def triton_supported() -> bool:
    """Whether this jax has the Pallas Triton API the kernels use (jax >= 0.9.1)."""
    return _jax_version() >= MIN_JAX


def triton_fits(num_table_rows: int) -> bool:
    """Whether a table of this many rows (Gaussians + sentinel) fits the kernels' int32 offsets."""
    return num_table_rows * ROW < 2**31


def _check_jax():
    if not triton_supported():
        raise RuntimeError(
            f"locojax.render.pallas.triton_composite needs jax >= 0.9.1 (Pallas Triton routing via "
            f"triton.CompilerParams), found jax {jax.__version__}; use config.render.backend='xla' or "
            f"upgrade jax")


def _pallas():
    _check_jax()
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    return pl, plgpu


def _next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _pixels(tile_size, npix_pad, ox, oy, width, height):
    """Tile-local pixel centres (lx, ly) [Pp] float and the in-image mask [Pp] of a row whose
    tile origin is (ox, oy) (int32 scalars); pixels past tile_size**2 (power-of-2 padding) are out."""
    p = jax.lax.broadcasted_iota(jnp.int32, (npix_pad,), 0)
    ly, lx = p // tile_size, p % tile_size
    inside = (p < tile_size * tile_size) & (ox + lx < width) & (oy + ly < height)
    return lx.astype(jnp.float32) + 0.5, ly.astype(jnp.float32) + 0.5, inside


def _entry(ids_ref, start, limit, e, num_ids, sentinel):
    """Gaussian id of list position e (row-relative, int32 scalar): the sentinel past the row's end.
    The id load is clamped in range (an out-of-range pointer is undefined on a GPU)."""
    pos = jnp.minimum(start + e, num_ids - 1)
    g = jnp.where(e < limit, ids_ref[pos], sentinel)
    return jnp.clip(g, 0, sentinel)


def _attrs(table_ref, g):
    return [table_ref[g * ROW + a] for a in range(NUM_ATTRS)]


def _alpha(a, fox, foy, lx, ly):
    """gsplat's per-pixel alpha of one entry, in tile-local coordinates as composite.py."""
    mx, my = a[0] - fox, a[1] - foy
    dx, dy = mx - lx, my - ly
    sigma = 0.5 * (a[2] * dx * dx + a[4] * dy * dy) + a[3] * dx * dy
    ex = jnp.exp(-sigma)
    raw = a[5] * ex
    alpha = jnp.minimum(0.999, raw)
    valid = (sigma >= 0.0) & (alpha >= ALPHA_THRESHOLD)
    return dx, dy, ex, raw, alpha, valid


def _forward_kernel(table_ref, ids_ref, starts_ref, limits_ref, origins_ref,
                    r_ref, g_ref, b_ref, z_ref, t_ref, count_ref, *, tile_size, width, height, chunk,
                    npix_pad, num_ids, sentinel):
    row = _program_id(0)
    start, limit = starts_ref[row], limits_ref[row]
    ox, oy = origins_ref[2 * row], origins_ref[2 * row + 1]
    lx, ly, inside = _pixels(tile_size, npix_pad, ox, oy, width, height)
    fox, foy = ox.astype(jnp.float32), oy.astype(jnp.float32)
    zeros = jnp.zeros((npix_pad,), jnp.float32)

    def cond(c):
        k, _, done = c[0], c[1], c[2]
        alive = jnp.max(jnp.where(inside & (done == 0), 1, 0).astype(jnp.int32))
        return (k * chunk < limit) & (alive > 0)

    def entry(j, c):
        k, t, done, acc_r, acc_g, acc_b, acc_z, count = c
        e = k * chunk + j
        gid = _entry(ids_ref, start, limit, e, num_ids, sentinel)
        a = _attrs(table_ref, gid)
        _, _, _, _, alpha, valid = _alpha(a, fox, foy, lx, ly)
        next_t = t * (1.0 - alpha)
        live = valid & (done == 0)
        used = live & (next_t > T_STOP)
        done = jnp.where(live & (next_t <= T_STOP), 1, done)
        w = jnp.where(used, alpha * t, 0.0)
        acc_r, acc_g, acc_b, acc_z = (acc_r + w * a[6], acc_g + w * a[7], acc_b + w * a[8], acc_z + w * a[9])
        t = jnp.where(used, next_t, t)
        count = jnp.where(used, e + 1, count)
        return k, t, done, acc_r, acc_g, acc_b, acc_z, count

    def body(c):
        c = jax.lax.fori_loop(0, chunk, entry, c)
        return (c[0] + 1,) + c[1:]

    init = (jnp.int32(0), zeros + 1.0, jnp.zeros((npix_pad,), jnp.int32), zeros, zeros, zeros, zeros,
            jnp.zeros((npix_pad,), jnp.int32))
    _, t, _, acc_r, acc_g, acc_b, acc_z, count = jax.lax.while_loop(cond, body, init)
    r_ref[...] = acc_r
    g_ref[...] = acc_g
    b_ref[...] = acc_b
    z_ref[...] = acc_z
    t_ref[...] = t
    count_ref[...] = count


def _backward_kernel(table_ref, ids_ref, starts_ref, limits_ref, origins_ref, count_ref, gr_ref, gg_ref,
                     gb_ref, gz_ref, gtotal_ref, gtt_ref, grad_in_ref, grad_ref, *, tile_size, width,
                     height, chunk, npix_pad, num_ids, sentinel):
    del grad_in_ref  # aliased to grad_ref: the zero-initialised accumulator
    pl, plgpu = _pallas()
    row = pl.program_id(0)
    start, limit = starts_ref[row], limits_ref[row]
    ox, oy = origins_ref[2 * row], origins_ref[2 * row + 1]
    lx, ly, _ = _pixels(tile_size, npix_pad, ox, oy, width, height)
    fox, foy = ox.astype(jnp.float32), oy.astype(jnp.float32)
    count = count_ref[...]
    g_col = (gr_ref[...], gg_ref[...], gb_ref[...], gz_ref[...])
    g_total, g_tt = gtotal_ref[...], gtt_ref[...]
    bound = jnp.max(count)  # gsplat's warp_bin_final: no pixel used an entry past it
    lane = jax.lax.broadcasted_iota(jnp.int32, (ROW,), 0)
    zeros = jnp.zeros((npix_pad,), jnp.float32)

    def entry(j, c):
        k, t, prefix = c
        e = k * chunk + j
        gid = _entry(ids_ref, start, limit, e, num_ids, sentinel)
        a = _attrs(table_ref, gid)
        dx, dy, ex, raw, alpha, valid = _alpha(a, fox, foy, lx, ly)
        used = valid & (e < count)
        w = jnp.where(used, alpha * t, 0.0)
        v = g_col[0] * a[6] + g_col[1] * a[7] + g_col[2] * a[8] + g_col[3] * a[9]
        prefix = prefix + w * v
        g_alpha = t * v - (g_total - prefix + g_tt) / (1.0 - alpha)
        # The clamp at 0.999 cuts the gradient through alpha (gsplat Bwd.cu L222).
        g_alpha = jnp.where(used & (raw < 0.999), g_alpha, 0.0)
        g_sigma = -g_alpha * alpha
        sums = (
            jnp.sum(g_sigma * (a[2] * dx + a[3] * dy)),  # mean x (dx = mean - pixel)
            jnp.sum(g_sigma * (a[4] * dy + a[3] * dx)),  # mean y
            jnp.sum(g_sigma * (0.5 * dx * dx)),  # conic a
            jnp.sum(g_sigma * (dx * dy)),  # conic b
            jnp.sum(g_sigma * (0.5 * dy * dy)),  # conic c
            jnp.sum(g_alpha * ex),  # opacity: alpha = o exp(-sigma) wherever g_alpha != 0
            jnp.sum(w * g_col[0]), jnp.sum(w * g_col[1]), jnp.sum(w * g_col[2]), jnp.sum(w * g_col[3]),
        )
        vec = jnp.zeros((ROW,), jnp.float32)
        for i, s in enumerate(sums):
            vec = jnp.where(lane == i, s, vec)
        plgpu.atomic_add(grad_ref, (gid * ROW + lane,), vec)
        return k, jnp.where(used, t * (1.0 - alpha), t), prefix

    def body(c):
        c = jax.lax.fori_loop(0, chunk, entry, c)
        return (c[0] + 1,) + c[1:]

    jax.lax.while_loop(lambda c: c[0] * chunk < bound, body, (jnp.int32(0), zeros + 1.0, zeros))


def _common(table, ids, starts, limits, origins, tile_size, chunk):
    """Kernel operands: table padded to [N + 1, 16] and flattened, origins flattened, and the
    static sizes."""
    n1 = table.shape[0]
    flat_table = jnp.pad(table.astype(jnp.float32), ((0, 0), (0, ROW - table.shape[1]))).reshape(-1)
    statics = dict(tile_size=tile_size, chunk=chunk, npix_pad=_next_pow2(tile_size * tile_size),
                   num_ids=max(ids.shape[0], 1), sentinel=n1 - 1)
    ids = ids.astype(jnp.int32) if ids.shape[0] else jnp.full((1,), n1 - 1, jnp.int32)
    return (flat_table, ids, starts.astype(jnp.int32), limits.astype(jnp.int32),
            origins.astype(jnp.int32).reshape(-1)), statics


def _row_spec(pl, npix_pad):
    return pl.BlockSpec((None, npix_pad), lambda r: (r, 0))


def _forward(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret):
    pl, plgpu = _pallas()
    operands, st = _common(table, ids, starts, limits, origins, tile_size, chunk)
    num_rows, pp = starts.shape[0], st["npix_pad"]
    f32 = jax.ShapeDtypeStruct((num_rows, pp), jnp.float32)
    outs = pl.pallas_call(
        partial(_forward_kernel, width=width, height=height, **st),
        out_shape=(f32,) * 5 + (jax.ShapeDtypeStruct((num_rows, pp), jnp.int32),),
        grid=(num_rows,),
        in_specs=[pl.no_block_spec] * 5,
        out_specs=[_row_spec(pl, pp)] * 6,
        compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=NUM_STAGES),
        interpret=interpret,
        name="locojax_composite_fwd",
    )(*operands)
    npix = tile_size * tile_size
    rgbz = jnp.stack([o[:, :npix] for o in outs[:4]])
    return (rgbz, outs[4][:, :npix]), outs[5]


def _backward(table, ids, starts, limits, origins, count, g_rgbz, g_total, g_tt, tile_size, width, height,
              chunk, interpret):
    pl, plgpu = _pallas()
    operands, st = _common(table, ids, starts, limits, origins, tile_size, chunk)
    pp, npix = st["npix_pad"], tile_size * tile_size
    pad = lambda x: jnp.pad(x, ((0, 0), (0, pp - npix)))
    per_row = [count] + [pad(g_rgbz[c]) for c in range(4)] + [pad(g_total), pad(g_tt)]
    zeros = jnp.zeros_like(operands[0])
    grad = pl.pallas_call(
        partial(_backward_kernel, width=width, height=height, **st),
        out_shape=jax.ShapeDtypeStruct(zeros.shape, jnp.float32),
        grid=(starts.shape[0],),
        in_specs=[pl.no_block_spec] * 5 + [_row_spec(pl, pp)] * 7 + [pl.no_block_spec],
        out_specs=pl.no_block_spec,
        input_output_aliases={12: 0},
        compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=NUM_STAGES),
        interpret=interpret,
        name="locojax_composite_bwd",
    )(*operands, *per_row, zeros)
    return grad.reshape(table.shape[0], ROW)[:, :table.shape[1]].astype(table.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7, 8, 9))
def _composite(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret):
    return _forward(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret)[0]


def _fwd(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret):
    out, count = _forward(table, ids, starts, limits, origins, tile_size, width, height, chunk, interpret)
    return out, (table, ids, starts, limits, origins, out, count)


def _bwd(tile_size, width, height, chunk, interpret, res, cts):
    table, ids, starts, limits, origins, (rgbz, t_final), count = res
    g_rgbz, g_t = cts
    g_total = jnp.sum(g_rgbz * rgbz, 0)  # sum_i w_i v_i per pixel
    grad = _backward(table, ids, starts, limits, origins, count, g_rgbz, g_total, g_t * t_final, tile_size,
                     width, height, chunk, interpret)
    return grad, None, None, None, None


_composite.defvjp(_fwd, _bwd)


def composite_tiles_triton(table, ids, starts, limits, origins, tile_size, width, height, chunk, *,
                           interpret=False):
    """Blend tile lists with Pallas Triton kernels (GPU; `interpret=True` runs them anywhere).

    Args:
      table: [N + 1, 10] float32 packed attributes (mean x, y | conic a, b, c | opacity | r, g, b |
        camera z); the last row is an opacity-0 sentinel.
      ids: [M] int32 Gaussian ids; row r's list is ids[starts[r] : starts[r] + limits[r]], nearest first.
      starts, limits: [R] int32 (R = images x tiles).
      origins: [R, 2] int32 pixel (x, y) of each row's tile (pixels outside width x height ignored).
      tile_size, width, height, chunk: static ints; chunk = list entries per loop step.
      interpret: run the kernels in the Pallas interpreter (CPU tests).
    Returns:
      rgbz [4, R, P] (r, g, b without background, then accumulated z) and the final transmittance
      t_final [R, P], P = tile_size**2 pixels row-major within the tile. Differentiable w.r.t.
      `table` (custom VJP), like `locojax.render.composite.composite_tiles`.
    """
    _check_jax()
    if not triton_fits(table.shape[0]):  # flat int32 offsets g * 16 + column inside the kernels
        raise ValueError(
            f"composite_tiles_triton: {table.shape[0]:,} table rows x {ROW} exceed the int32 offsets of the "
            f"Triton kernels (at most {(2**31 - 1) // ROW:,} rows = images composited together x Gaussians); "
            f"lower the Gaussian count or use config.render.backend='xla'")
    return _composite(table, ids, starts, limits, origins, int(tile_size), int(width), int(height),
                      int(chunk), bool(interpret))
