"""Tile compositing primitive: front-to-back alpha blending of per-tile Gaussian lists, with a
custom VJP whose memory is O(tiles x tile pixels), independent of the number of Gaussians.

Forward (per pixel, gsplat `RasterizeToPixels3DGSFwd.cu`):
  alpha_i = min(0.999, o_i exp(-sigma_i)), skipped if sigma_i < 0 or alpha_i < 1/255;
  Gaussian i is used iff T_i (1 - alpha_i) > 1e-4, T_i = prod_{j < i, not skipped} (1 - alpha_j).
  Because T only decreases, this equals gsplat's "stop at the first Gaussian that would push T to
  1e-4 or below, exclusive": every later one fails the test too.
Rows (images x tiles) go in blocks of ROWS_PER_BLOCK (a sequential `lax.map`); within a block all
tiles advance together through their lists in chunks of `chunk` Gaussians (a while loop that ends
once every tile of the block is exhausted or all its pixels are saturated, like gsplat's
block-wide early exit). Within a chunk, transmittance is a running product (float32, linear
space, as gsplat). The forward also records how many chunks each row needed.

Backward: one more front-to-back walk that re-evaluates alpha and T and uses the closed form of
the blending gradient, with the suffix sums obtained as total - prefix:
  dL/dalpha_i = T_i v_i - (sum_{k > i} w_k v_k + g_T T_final) / (1 - alpha_i),
  v_i = <g_rgb, c_i> + g_z z_i,  w_i = alpha_i T_i.
Its blocks take the rows sorted by the number of chunks the forward needed, so each block stops
close to its own rows' saturation point. Per-pair gradients are scatter-added into the
per-Gaussian table.

Static trip count (`early_exit=False`): the same walks, but every block runs ceil(max_count / chunk)
chunks (`lax.fori_loop` with bounds known at trace time); chunks past a row's list read the opacity-0
sentinel and chunks past saturation have T <= 1e-4, so they add exactly zero and the numbers are
those of the early-exit path. XLA:GPU runs a while loop whose trip count depends on the data by
copying the condition to the host at every iteration (openxla/xla `while_thunk.cc`); with a
static trip count it does not.

CPU notes (XLA:CPU; measured, see the benchmark): colour sums are elementwise multiply-reduces
with the pixel axis minor (tiny batched dots are slow), and the in-chunk scans are written as a
chain of slices, which XLA fuses into one loop (`jnp.cumprod` becomes an unfused reduce-window).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from locojax.render.projection import ALPHA_THRESHOLD

T_STOP = 1e-4
# Tiles composited together in one while loop: small enough that a chunk's [rows, chunk, pixels]
# intermediates stay in cache, and each block exits as soon as its own tiles are done.
ROWS_PER_BLOCK = 64
# Packed per-Gaussian attributes: mean x, y | conic a, b, c | opacity | r, g, b | camera z.
NUM_ATTRS = 10


def _tile_geometry(origins, tile_size: int, width: int, height: int):
    """Tile origins [R, 2] float (pixels), local pixel centres [P, 2] and in-image mask [R, P] of the
    tiles with integer pixel origins `origins` [R, 2] (x, y).

    Compositing works in tile-local coordinates so that the backward's moment sums (below) stay
    well conditioned in float32.
    """
    ly, lx = jnp.divmod(jnp.arange(tile_size * tile_size), tile_size)
    local = jnp.stack([lx, ly], -1)  # [P, 2]
    pix = origins[:, None, :] + local[None]
    inside = (pix[..., 0] < width) & (pix[..., 1] < height)
    return origins.astype(jnp.float32), local.astype(jnp.float32) + 0.5, inside


def _chunk_ids(ids, starts, limits, k, chunk, sentinel):
    """Entries k * chunk .. (k + 1) * chunk of every row's list -> [R, chunk] (sentinel past the end)."""
    j = k * chunk + jnp.arange(chunk, dtype=jnp.int32)
    listed = j[None, :] < limits[:, None]
    # starts + limits <= M, so masking j before the add keeps the int32 index below M.
    pos = jnp.minimum(starts[:, None] + jnp.where(listed, j[None, :], 0), ids.shape[0] - 1)
    return jnp.where(listed, ids[pos], sentinel)


def _eval_chunk(table, ids, origin, local):
    """Gather chunk `ids` [T, B] and evaluate its alphas at the tile's pixels -> arrays [T, B, P]."""
    a = table[ids]  # [T, B, NUM_ATTRS]
    mx = a[..., 0] - origin[:, None, 0]  # tile-local mean [T, B]
    my = a[..., 1] - origin[:, None, 1]
    dx = mx[..., None] - local[None, None, :, 0]
    dy = my[..., None] - local[None, None, :, 1]
    ca, cb, cc = a[..., 2, None], a[..., 3, None], a[..., 4, None]
    sigma = 0.5 * (ca * dx * dx + cc * dy * dy) + cb * dx * dy
    ex = jnp.exp(-sigma)
    raw = a[..., 5, None] * ex
    alpha = jnp.minimum(0.999, raw)
    valid = (sigma >= 0.0) & (alpha >= ALPHA_THRESHOLD)
    one_minus = jnp.where(valid, 1.0 - alpha, 1.0)
    return a, mx, my, ex, raw, alpha, valid, one_minus


def _running(x, op):
    """Inclusive scan of x [T, B, P] along the chunk axis B, as a chain of slices (see the module
    docstring: XLA fuses this into one loop)."""
    acc = [x[:, 0]]
    for b in range(1, x.shape[1]):
        acc.append(op(acc[-1], x[:, b]))
    return jnp.stack(acc, axis=1)


def _transmittance(t_carry, one_minus):
    """T after (t_incl) and before (t_before) each entry of a chunk, [T, B, P], from the carried
    T [T, P] and the chunk's (1 - alpha) (1 where skipped)."""
    t_incl = t_carry[:, None, :] * _running(one_minus, jnp.multiply)
    t_before = jnp.concatenate([t_carry[:, None, :], t_incl[:, :-1, :]], axis=1)
    return t_incl, t_before


def _blocks(num_rows):
    """Block layout: (blocks, rows per block, padding rows)."""
    rb = min(ROWS_PER_BLOCK, num_rows)
    nb = -(-num_rows // rb)
    return nb, rb, nb * rb - num_rows


def _split(x, nb, rb, pad_r):
    x = jnp.pad(x, ((0, pad_r),) + ((0, 0),) * (x.ndim - 1))
    return x.reshape((nb, rb) + x.shape[1:])


def _num_chunks(ids, chunk, max_count):
    """Static trip count of the `early_exit=False` walks: chunks needed by the longest possible list."""
    bound = ids.shape[0] if max_count is None else min(int(max_count), ids.shape[0])
    return -(-max(bound, 1) // chunk)


def _loop(cond, body, init, num_iters):
    """`while_loop(cond, body, init)` (num_iters None) or `num_iters` static iterations of body, whose
    extra iterations must leave the result unchanged (masked chunks)."""
    if num_iters is None:
        return jax.lax.while_loop(cond, body, init)
    return jax.lax.fori_loop(0, num_iters, lambda _, c: body(c), init)


def _forward(table, ids, starts, limits, origins, *, tile_size, width, height, chunk, num_iters):
    """All rows, block by block -> ((rgbz [4, R, P], t_final [R, P]), chunks used per row [R])."""
    num_rows = starts.shape[0]
    nb, rb, pad_r = _blocks(num_rows)
    xs = tuple(_split(x, nb, rb, pad_r) for x in (starts, limits, origins))
    (rgbz, t_final), row_chunks = jax.lax.map(
        lambda x: _forward_block(table, ids, *x, tile_size=tile_size, width=width, height=height,
                                 chunk=chunk, num_iters=num_iters), xs)
    rgbz = jnp.moveaxis(rgbz, 1, 0).reshape((4, nb * rb) + rgbz.shape[3:])[:, :num_rows]
    unblock = lambda x: x.reshape((nb * rb,) + x.shape[2:])[:num_rows]
    return (rgbz, unblock(t_final)), unblock(row_chunks)


def _forward_block(table, ids, starts, limits, origins, *, tile_size, width, height, chunk, num_iters):
    num_rows = starts.shape[0]
    sentinel = table.shape[0] - 1
    origin, local, inside = _tile_geometry(origins, tile_size, width, height)
    npix = local.shape[0]

    def alive(k, t_all):  # [rows]: pixels left to draw and entries left to read
        return jnp.any((t_all > T_STOP) & inside, axis=1) & (k * chunk < limits)

    def body(c):
        k, t_all, t_used, rgbz, row_chunks = c
        row_chunks = row_chunks + alive(k, t_all)
        cid = _chunk_ids(ids, starts, limits, k, chunk, sentinel)
        a, _, _, _, _, alpha, valid, one_minus = _eval_chunk(table, cid, origin, local)
        t_incl, t_before = _transmittance(t_all, one_minus)
        used = valid & (t_incl > T_STOP)
        w = jnp.where(used, alpha * t_before, 0.0)
        col = jnp.moveaxis(a[..., 6:10], -1, 0)[..., None]  # [4, T, B, 1]
        rgbz = rgbz + jnp.sum(w[None] * col, axis=2)  # sum_b w_b c_b, [4, T, P]
        t_used = t_used * jnp.prod(jnp.where(used, one_minus, 1.0), axis=1)
        return k + 1, t_incl[:, -1, :], t_used, rgbz, row_chunks

    ones = jnp.ones((num_rows, npix), jnp.float32)
    init = (jnp.int32(0), ones, ones, jnp.zeros((4, num_rows, npix), jnp.float32),
            jnp.zeros((num_rows,), jnp.int32))
    _, _, t_used, rgbz, row_chunks = _loop(lambda c: jnp.any(alive(c[0], c[1])), body, init, num_iters)
    return (rgbz, t_used), row_chunks


def composite_tiles(table, ids, starts, limits, origins, tile_size, width, height, chunk, early_exit=True,
                    max_count=None):
    """Blend tile lists.

    Args:
      table: [N + 1, 10] packed attributes (last row: an opacity-0 sentinel).
      ids: [M] int32 Gaussian ids; row r's list is ids[starts[r] : starts[r] + limits[r]], nearest first.
      starts, limits: [R] int32 (R = images x tiles).
      origins: [R, 2] int32 pixel (x, y) of each row's tile (pixels outside width x height ignored).
      tile_size, width, height, chunk: static.
      early_exit: static. True: data-dependent while loops that stop once every row of a block is
        exhausted or saturated (fastest on CPU). False: a static trip count of ceil(max_count / chunk)
        masked chunks per block, forward and backward (no host synchronisation on GPUs); same numbers.
      max_count: static upper bound on `limits` (the tile capacity), only used with early_exit=False;
        default M (always safe, but every block then walks M entries). Entries past it are not read.
    Returns:
      rgbz [4, R, P] (r, g, b without background, then accumulated z), final transmittance [R, P];
      P = tile_size**2, pixels row-major within the tile. Differentiable w.r.t. `table` only.
    """
    num_iters = None if early_exit else _num_chunks(ids, chunk, max_count)
    return _composite(table, ids, starts, limits, origins, int(tile_size), int(width), int(height), int(chunk),
                      num_iters)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7, 8, 9))
def _composite(table, ids, starts, limits, origins, tile_size, width, height, chunk, num_iters):
    return _forward(table, ids, starts, limits, origins, tile_size=tile_size, width=width, height=height,
                    chunk=chunk, num_iters=num_iters)[0]


def _fwd(table, ids, starts, limits, origins, tile_size, width, height, chunk, num_iters):
    out, row_chunks = _forward(table, ids, starts, limits, origins, tile_size=tile_size, width=width,
                               height=height, chunk=chunk, num_iters=num_iters)
    return out, (table, ids, starts, limits, origins, out, row_chunks)


def _bwd(tile_size, width, height, chunk, num_iters, res, cts):
    table, ids, starts, limits, origins, (rgbz, t_final), row_chunks = res
    g_rgbz, g_t = cts
    num_rows = starts.shape[0]
    nb, rb, pad_r = _blocks(num_rows)
    # Rows sorted by the chunks they need: a block runs as long as its longest row.
    perm = jnp.argsort(row_chunks)
    block = lambda x: _split(x[perm], nb, rb, pad_r)  # [R, ...] -> [blocks, rows, ...]
    block4 = lambda x: jnp.moveaxis(block(jnp.moveaxis(x, 1, 0)), 2, 1)  # [4, R, P] -> [blocks, 4, rows, P]
    chunks = jnp.max(block(row_chunks), axis=1)
    xs = (block(starts), block(limits), block(origins), block4(rgbz), block(t_final), block4(g_rgbz),
          block(g_t), chunks)

    def step(grad, x):
        return _bwd_block(table, ids, grad, *x, tile_size=tile_size, width=width, height=height,
                          chunk=chunk, num_iters=num_iters), None

    grad, _ = jax.lax.scan(step, jnp.zeros_like(table), xs)
    return grad, None, None, None, None


def _bwd_block(table, ids, grad, starts, limits, origins, rgbz, t_final, g_rgbz, g_t, num_chunks, *,
               tile_size, width, height, chunk, num_iters):
    num_rows = starts.shape[0]
    sentinel = table.shape[0] - 1
    origin, local, _ = _tile_geometry(origins, tile_size, width, height)
    lx, ly = local[:, 0], local[:, 1]
    # Pixel moments: every sum over pixels below is one matmul against these.
    moments = jnp.stack([jnp.ones_like(lx), lx, ly, lx * lx, ly * ly, lx * ly], -1)  # [P, 6]
    g_total = jnp.sum(g_rgbz * rgbz, 0)  # sum_i w_i v_i per pixel, [T, P]
    g_tt = g_t * t_final

    def body(c):
        k, t_all, g_prefix, grad = c
        cid = _chunk_ids(ids, starts, limits, k, chunk, sentinel)
        a, mx, my, ex, raw, alpha, valid, one_minus = _eval_chunk(table, cid, origin, local)
        t_incl, t_before = _transmittance(t_all, one_minus)
        used = valid & (t_incl > T_STOP)
        w = jnp.where(used, alpha * t_before, 0.0)
        v = sum(g_rgbz[c][:, None, :] * a[..., 6 + c, None] for c in range(4))  # <g_rgb, c_i> + g_z z_i
        g_incl = g_prefix[:, None, :] + _running(w * v, jnp.add)
        suffix = g_total[:, None, :] - g_incl
        g_alpha = t_before * v - (suffix + g_tt[:, None, :]) / (1.0 - alpha)
        g_alpha = jnp.where(used & (raw < 0.999), g_alpha, 0.0)
        g_sigma = -g_alpha * alpha
        g_colz = jnp.moveaxis(jnp.sum(w[None] * g_rgbz[:, :, None, :], axis=-1), 0, -1)  # [T, B, 4]
        # sigma = 0.5 (a dx^2 + c dy^2) + b dx dy with dx = mx - lx: expand the pixel sums of
        # g_sigma * {dx, dy, dx^2, dy^2, dx dy} into moments of (lx, ly).
        # HIGHEST: float32 on GPUs/TPUs too (their default TF32 / bfloat16 passes break gsplat parity).
        sums = jnp.einsum("tbp,pk->tbk", g_sigma, moments, precision=jax.lax.Precision.HIGHEST)
        s0, sx, sy, sxx, syy, sxy = jnp.moveaxis(sums, -1, 0)
        s_dx = mx * s0 - sx
        s_dy = my * s0 - sy
        s_dxx = mx * mx * s0 - 2.0 * mx * sx + sxx
        s_dyy = my * my * s0 - 2.0 * my * sy + syy
        s_dxy = mx * my * s0 - mx * sy - my * sx + sxy
        ca, cb, cc, op = a[..., 2], a[..., 3], a[..., 4], a[..., 5]
        # dL/do = sum_p g_alpha exp(-sigma) = -s0 / o: g_alpha is 0 wherever alpha was clamped, so
        # alpha = o exp(-sigma) at every pixel that contributes (o >= 1/255 for listed Gaussians).
        g_op = jnp.where(op > 0.0, -s0 / jnp.where(op > 0.0, op, 1.0), 0.0)
        g_mx = ca * s_dx + cb * s_dy
        g_my = cc * s_dy + cb * s_dx
        pair_grads = jnp.concatenate(
            [jnp.stack([g_mx, g_my, 0.5 * s_dxx, s_dxy, 0.5 * s_dyy, g_op], -1), g_colz], axis=-1)
        grad = grad.at[cid.reshape(-1)].add(pair_grads.reshape(-1, NUM_ATTRS))
        return k + 1, t_incl[:, -1, :], g_incl[:, -1, :], grad

    zeros = jnp.zeros((num_rows, local.shape[0]), jnp.float32)
    init = (jnp.int32(0), jnp.ones_like(zeros), zeros, grad)
    _, _, _, grad = _loop(lambda c: c[0] < num_chunks, body, init, num_iters)
    return grad


_composite.defvjp(_fwd, _bwd)
