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
block-wide early exit). Within a chunk, transmittance is a cumulative product (float32, linear space, as gsplat).

Backward: one more front-to-back walk (same chunks) that re-evaluates alpha and T and uses the
closed form of the blending gradient, with the suffix sums obtained as total - prefix:
  dL/dalpha_i = T_i v_i - (sum_{k > i} w_k v_k + g_T T_final) / (1 - alpha_i),
  v_i = <g_rgb, c_i> + g_z z_i,  w_i = alpha_i T_i.
Per-pair gradients are scatter-added into the per-Gaussian table.
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


def _tile_geometry(rows, tile_size: int, width: int, height: int):
    """Tile origins [R, 2] (pixels), local pixel centres [P, 2] and in-image mask [R, P] of the tile
    rows `rows` [R] (global row r is tile r % tiles_per_image).

    Compositing works in tile-local coordinates so that the backward's moment sums (below) stay
    well conditioned in float32.
    """
    tiles_x, tiles_y = -(-width // tile_size), -(-height // tile_size)
    t = rows % (tiles_x * tiles_y)
    origin = jnp.stack([t % tiles_x, t // tiles_x], -1) * tile_size  # [R, 2] (x, y)
    ly, lx = jnp.divmod(jnp.arange(tile_size * tile_size), tile_size)
    local = jnp.stack([lx, ly], -1)  # [P, 2]
    pix = origin[:, None, :] + local[None]
    inside = (pix[..., 0] < width) & (pix[..., 1] < height)
    return origin.astype(jnp.float32), local.astype(jnp.float32) + 0.5, inside


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


def _transmittance(t_carry, one_minus):
    """T after (t_incl) and before (t_before) each entry of a chunk, [T, B, P], from the carried
    T [T, P] and the chunk's (1 - alpha) (1 where skipped)."""
    t_incl = t_carry[:, None, :] * jnp.cumprod(one_minus, axis=1)
    t_before = jnp.concatenate([t_carry[:, None, :], t_incl[:, :-1, :]], axis=1)
    return t_incl, t_before


def _blocks(ids, chunk):
    """Block layout: (blocks, rows per block, padding rows, padding list entries)."""
    num_rows, cap = ids.shape
    rb = min(ROWS_PER_BLOCK, num_rows)
    nb = -(-num_rows // rb)
    return nb, rb, nb * rb - num_rows, -(-cap // chunk) * chunk - cap


def _split(x, nb, rb, pad_r, fill):
    x = jnp.pad(x, ((0, pad_r),) + ((0, 0),) * (x.ndim - 1), constant_values=fill)
    return x.reshape((nb, rb) + x.shape[1:])


def _forward(table, ids, limits, *, tile_size, width, height, chunk):
    """All rows, block by block (each block has its own early exit and fits in cache)."""
    num_rows = ids.shape[0]
    nb, rb, pad_r, pad_c = _blocks(ids, chunk)
    sentinel = table.shape[0] - 1
    ids = jnp.pad(ids, ((0, 0), (0, pad_c)), constant_values=sentinel)
    xs = (_split(ids, nb, rb, pad_r, sentinel), _split(limits, nb, rb, pad_r, 0),
          _split(jnp.arange(num_rows), nb, rb, pad_r, 0))
    out, k_end = jax.lax.map(lambda x: _forward_block(table, *x, tile_size=tile_size, width=width,
                                                      height=height, chunk=chunk), xs)
    out = tuple(o.reshape((nb * rb,) + o.shape[2:])[:num_rows] for o in out)
    return out, k_end


def _forward_block(table, ids, limits, rows, *, tile_size, width, height, chunk):
    num_rows, cap = ids.shape
    num_chunks = cap // chunk
    origin, local, inside = _tile_geometry(rows, tile_size, width, height)
    npix = local.shape[0]

    def cond(c):
        k, t_all = c[0], c[1]
        alive = jnp.any((t_all > T_STOP) & inside, axis=1)
        return (k < num_chunks) & jnp.any(alive & (k * chunk < limits))

    def body(c):
        k, t_all, t_used, rgb, zacc = c
        cid = jax.lax.dynamic_slice_in_dim(ids, k * chunk, chunk, axis=1)
        a, _, _, _, _, alpha, valid, one_minus = _eval_chunk(table, cid, origin, local)
        t_incl, t_before = _transmittance(t_all, one_minus)
        used = valid & (t_incl > T_STOP)
        w = jnp.where(used, alpha * t_before, 0.0)
        rgbz = jnp.einsum("tbp,tbc->tpc", w, a[..., 6:10])
        t_used = t_used * jnp.prod(jnp.where(used, one_minus, 1.0), axis=1)
        return k + 1, t_incl[:, -1, :], t_used, rgb + rgbz[..., :3], zacc + rgbz[..., 3]

    ones = jnp.ones((num_rows, npix), jnp.float32)
    init = (jnp.int32(0), ones, ones, jnp.zeros((num_rows, npix, 3), jnp.float32), jnp.zeros_like(ones))
    k_end, _, t_used, rgb, zacc = jax.lax.while_loop(cond, body, init)
    return (rgb, zacc, t_used), k_end


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def composite_tiles(table, ids, limits, tile_size, width, height, chunk):
    """Blend tile lists.

    Args:
      table: [N + 1, 10] packed attributes (last row: an opacity-0 sentinel that `ids` pads with).
      ids: [R, C] int32 rows of Gaussian ids, nearest first (R = images x tiles).
      limits: [R] int32 number of meaningful entries per row (<= C).
      tile_size, width, height, chunk: static.
    Returns:
      rgb [R, P, 3] (no background), accumulated z [R, P], final transmittance [R, P]; P = tile_size**2.
    """
    return _forward(table, ids, limits, tile_size=tile_size, width=width, height=height, chunk=chunk)[0]


def _fwd(table, ids, limits, tile_size, width, height, chunk):
    out, k_end = _forward(table, ids, limits, tile_size=tile_size, width=width, height=height, chunk=chunk)
    return out, (table, ids, limits, out, k_end)


def _bwd(tile_size, width, height, chunk, res, cts):
    table, ids, limits, out, k_end = res
    num_rows = ids.shape[0]
    nb, rb, pad_r, pad_c = _blocks(ids, chunk)
    sentinel = table.shape[0] - 1
    ids = jnp.pad(ids, ((0, 0), (0, pad_c)), constant_values=sentinel)
    split = lambda x, fill=0: _split(x, nb, rb, pad_r, fill)
    xs = (split(ids, sentinel), split(jnp.arange(num_rows)), tuple(split(o) for o in out),
          tuple(split(g) for g in cts), k_end)

    def step(grad, x):
        return _bwd_block(table, grad, *x, tile_size=tile_size, width=width, height=height, chunk=chunk), None

    grad, _ = jax.lax.scan(step, jnp.zeros_like(table), xs)
    return grad, None, None


def _bwd_block(table, grad, ids, rows, out, cts, k_end, *, tile_size, width, height, chunk):
    rgb, zacc, t_final = out
    g_rgb, g_z, g_t = cts
    num_rows = ids.shape[0]
    origin, local, _ = _tile_geometry(rows, tile_size, width, height)
    lx, ly = local[:, 0], local[:, 1]
    # Pixel moments: every sum over pixels below is one matmul against these.
    moments = jnp.stack([jnp.ones_like(lx), lx, ly, lx * lx, ly * ly, lx * ly], -1)  # [P, 6]
    g_total = jnp.sum(g_rgb * rgb, -1) + g_z * zacc  # sum_i w_i v_i per pixel
    g_tt = g_t * t_final
    g_rgbz = jnp.concatenate([g_rgb, g_z[..., None]], -1)  # [R, P, 4]

    def body(c):
        k, t_all, g_prefix, grad = c
        cid = jax.lax.dynamic_slice_in_dim(ids, k * chunk, chunk, axis=1)
        a, mx, my, ex, raw, alpha, valid, one_minus = _eval_chunk(table, cid, origin, local)
        t_incl, t_before = _transmittance(t_all, one_minus)
        used = valid & (t_incl > T_STOP)
        w = jnp.where(used, alpha * t_before, 0.0)
        v = jnp.einsum("tpc,tbc->tbp", g_rgbz, a[..., 6:10])  # <g_rgb, c_i> + g_z z_i
        g_incl = g_prefix[:, None, :] + jnp.cumsum(w * v, axis=1)
        suffix = g_total[:, None, :] - g_incl
        g_alpha = t_before * v - (suffix + g_tt[:, None, :]) / (1.0 - alpha)
        g_alpha = jnp.where(used & (raw < 0.999), g_alpha, 0.0)
        g_sigma = -g_alpha * alpha
        g_colz = jnp.einsum("tbp,tpc->tbc", w, g_rgbz)  # [T, B, 4]
        g_op = jnp.sum(g_alpha * ex, axis=-1)
        # sigma = 0.5 (a dx^2 + c dy^2) + b dx dy with dx = mx - lx: expand the pixel sums of
        # g_sigma * {dx, dy, dx^2, dy^2, dx dy} into moments of (lx, ly).
        s0, sx, sy, sxx, syy, sxy = jnp.moveaxis(jnp.einsum("tbp,pk->tbk", g_sigma, moments), -1, 0)
        s_dx = mx * s0 - sx
        s_dy = my * s0 - sy
        s_dxx = mx * mx * s0 - 2.0 * mx * sx + sxx
        s_dyy = my * my * s0 - 2.0 * my * sy + syy
        s_dxy = mx * my * s0 - mx * sy - my * sx + sxy
        ca, cb, cc = a[..., 2], a[..., 3], a[..., 4]
        g_mx = ca * s_dx + cb * s_dy
        g_my = cc * s_dy + cb * s_dx
        pair_grads = jnp.concatenate(
            [jnp.stack([g_mx, g_my, 0.5 * s_dxx, s_dxy, 0.5 * s_dyy, g_op], -1), g_colz], axis=-1)
        grad = grad.at[cid.reshape(-1)].add(pair_grads.reshape(-1, NUM_ATTRS))
        return k + 1, t_incl[:, -1, :], g_incl[:, -1, :], grad

    zeros = jnp.zeros((num_rows, local.shape[0]), jnp.float32)
    init = (jnp.int32(0), jnp.ones_like(zeros), zeros, grad)
    _, _, _, grad = jax.lax.while_loop(lambda c: c[0] < k_end, body, init)
    return grad


composite_tiles.defvjp(_fwd, _bwd)
