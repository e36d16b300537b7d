"""Winograd convolution F(m x m, 3 x 3) for 3x3 / stride 1 / padding 1 convs (NHWC, HWIO).

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016): for each m x m output tile,
  Y = A^T [ (G g G^T) * (B^T d B) ] A
with d the (m + 2) x (m + 2) input tile, g the 3 x 3 filter and * elementwise per tile position. Summed
over input channels, the elementwise product is (m + 2)^2 independent GEMMs [tiles, Cin] x [Cin, Cout]:
  F(2, 3): 16 GEMMs for 4 outputs per tile = 2.25x fewer multiplies than the direct conv,
  F(4, 3): 36 GEMMs for 16 outputs per tile = 4x fewer.
The filter transform U = G g G^T is done once per weight set (`winograd_filter`), the input transform
B^T d B and the output transform A^T M A are additions of shifted strided slices (memory-bound), so the
win is on layers with many channels and few pixels (VGG16 blocks 3-5); see `vgg16.py` for where it is
used and the measured speeds.

Everything is plain jnp / lax (differentiable, jittable, vmappable). Accuracy in float32: F(2, 3)
~1e-6 relative to the direct conv; F(4, 3) with the interpolation points 0, +-1, +-1/2 (more accurate
than Lavin's 0, +-1, +-2) ~1e-6 .. 1e-5.
"""

from __future__ import annotations

import functools

import numpy as np

import jax
import jax.numpy as jnp


def _transform_matrices(points):
    """Toom-Cook matrices (B^T, G, A^T) of F(m, 3) for the m + 1 finite interpolation points (+ infinity).

    Standard construction (Lavin & Gray section 4; Barabasz et al. 2020 for the point choice):
    A^T [m, n] evaluates at the points, G [n, 3] interpolates the filter, B^T [n, n] is the inverse
    of the Vandermonde-like input map, n = m + 2 (the point at infinity adds the last row/column).
    """
    points = np.asarray(points, np.float64)
    m = len(points) - 1  # m + 1 finite points -> F(m, 3), tile size n = m + 2
    n = m + 2
    # A^T: rows = output index i, columns = points (+ infinity column for the last output).
    at = np.zeros((m, n))
    for i in range(m):
        at[i, : n - 1] = points**i
    at[m - 1, n - 1] = 1.0
    # G: the filter evaluated at each point, scaled by 1 / prod_{k != j} (p_j - p_k) (Lagrange denominator).
    g = np.zeros((n, 3))
    for j, p in enumerate(points):
        denom = np.prod([p - q for k, q in enumerate(points) if k != j])
        g[j] = np.array([1.0, p, p * p]) / denom
    g[n - 1] = np.array([0.0, 0.0, 1.0])
    # B^T from the requirement A^T [(G g) * (B^T d)] = correlation of d with g, solved numerically: the
    # correlation y_i = sum_r g_r d_{i+r} is linear in the outer product g d^T, so B^T is the unique
    # solution of a small linear system (exact up to float64 rounding for these small rational points).
    # Unknown B^T [n, n]; constraint for every (i, r, s): sum_k at[i, k] * (g[k, r]) * bt[k, s] = [s == i + r].
    rows, rhs = [], []
    for i in range(m):
        for r in range(3):
            for s in range(n):
                row = np.zeros((n, n))
                row[:, s] = at[i] * g[:, r]
                rows.append(row.reshape(-1))
                rhs.append(1.0 if s == i + r else 0.0)
    bt, *_ = np.linalg.lstsq(np.asarray(rows), np.asarray(rhs), rcond=None)
    bt = bt.reshape(n, n)
    bt[np.abs(bt) < 1e-12] = 0.0
    return bt, g, at


_POINTS = {2: (0.0, 1.0, -1.0), 4: (0.0, 1.0, -1.0, 0.5, -0.5)}
_MATRICES = {m: _transform_matrices(p) for m, p in _POINTS.items()}


def _check_matrices():
    # The transforms must reproduce the direct 1D correlation exactly (float64): a cheap import-time proof.
    rng = np.random.default_rng(0)
    for m, (bt, g, at) in _MATRICES.items():
        d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
        direct = np.array([d[i : i + 3] @ w for i in range(m)])
        if not np.allclose(at @ ((g @ w) * (bt @ d)), direct, atol=1e-12):
            raise AssertionError(f"Winograd F({m}, 3) transform matrices are wrong")


_check_matrices()


def _combine(terms, matrix):
    """out_i = sum_j matrix[i, j] * terms[j], skipping zeros and multiplying only where |coef| != 1."""
    out = []
    for row in matrix:
        acc = None
        for coef, term in zip(row, terms):
            if coef == 0.0:
                continue
            scaled = term if coef == 1.0 else (-term if coef == -1.0 else term * np.float32(coef))
            acc = scaled if acc is None else acc + scaled
        out.append(acc)
    return out


def winograd_filter(kernel, tile, *, precision=jax.lax.Precision.HIGHEST):
    """U = G g G^T per (Cin, Cout): kernel [3, 3, Cin, Cout] (HWIO) -> [(tile + 2)^2, Cin, Cout]."""
    _, g, _ = _MATRICES[tile]
    g = jnp.asarray(g, kernel.dtype)
    n = tile + 2
    u = jnp.einsum("ij,jkcd,lk->ilcd", g, kernel, g, precision=precision)
    return u.reshape(n * n, kernel.shape[2], kernel.shape[3])


def winograd_conv3x3(x, filters, tile, *, precision=jax.lax.Precision.HIGHEST):
    """Same values as a 3x3 stride-1 'same' (padding 1) correlation, computed as F(tile x tile, 3 x 3).

    Args:
      x: [B, H, W, Cin]; any H, W (padded up to whole tiles, cropped back).
      filters: `winograd_filter(kernel, tile)`, [(tile + 2)^2, Cin, Cout].
    Returns:
      [B, H, W, Cout].
    """
    bt, _, at = _MATRICES[tile]
    n = tile + 2
    b, h, w, cin = x.shape
    cout = filters.shape[-1]
    th, tw = -(-h // tile), -(-w // tile)
    # Zero padding: 1 for the conv itself, the rest to fill the last tile (cropped at the end).
    xp = jnp.pad(x, ((0, 0), (1, th * tile + 1 - h), (1, tw * tile + 1 - w), (0, 0)))
    # Input transform V = B^T d B, separably: the tiles' rows (n strided slices along H), then the same
    # n-term combinations of strided slices along W of the stacked result. Few, large ops: XLA:CPU
    # compile time grows quickly with the number of slices (n^2 per-position ops compiled ~2x slower).
    rows = jnp.stack(_combine([xp[:, j : j + tile * (th - 1) + 1 : tile] for j in range(n)], bt))  # [n, B, th, Wp, Cin]
    v = jnp.stack(_combine([rows[:, :, :, j : j + tile * (tw - 1) + 1 : tile] for j in range(n)], bt), axis=1)
    v = v.reshape(n * n, b * th * tw, cin)  # [n(row), n(col), B, th, tw, Cin] flattened
    # (tile + 2)^2 GEMMs over the channels: the only multiplies of size O(Cin Cout).
    m = jax.lax.dot_general(v, filters, (((2,), (1,)), ((0,), (0,))), precision=precision)
    m = m.reshape(n, n, b, th, tw, cout)
    # Output transform Y = A^T M A, laid out [B, th, tile, tw, tile, Cout] so the final reshape is free.
    rows = jnp.stack(_combine([m[i] for i in range(n)], at), axis=3)  # [n(col), B, th, tile, tw, Cout]
    y = jnp.stack(_combine([rows[j] for j in range(n)], at), axis=4)  # [B, th, tile, tw, tile, Cout]
    return y.reshape(b, th * tile, tw * tile, cout)[:, :h, :w]


def flipped_kernel(kernel):
    """The kernel of the input gradient of a 'same' 3x3 correlation: spatially flipped, in/out swapped."""
    return jnp.swapaxes(jnp.flip(kernel, (0, 1)), 2, 3)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def winograd_conv3x3_same(x, kernel, filters, filters_flipped, tile, precision):
    """`winograd_conv3x3` with a Winograd backward: x [B, H, W, Cin] -> [B, H, W, Cout].

    kernel [3, 3, Cin, Cout]; filters = winograd_filter(kernel, tile); filters_flipped =
    winograd_filter(flipped_kernel(kernel), tile). The input gradient is the same conv with the flipped
    kernel (so again F(tile, 3)): autodiff through the strided-slice transforms measured ~5x the forward
    on CPU. The kernel gradient is the direct conv's (XLA drops it when unused, as in LPIPS); `filters`
    and `filters_flipped` get zero cotangents because they are functions of `kernel`, whose cotangent
    already carries the whole dependence.
    """
    return winograd_conv3x3(x, filters, tile, precision=precision)


def _winograd_fwd(x, kernel, filters, filters_flipped, tile, precision):
    return winograd_conv3x3(x, filters, tile, precision=precision), (x, kernel, filters, filters_flipped)


def _winograd_bwd(tile, precision, residuals, g):
    x, kernel, filters, filters_flipped = residuals
    g_x = winograd_conv3x3(g, filters_flipped, tile, precision=precision)
    direct = lambda k: jax.lax.conv_general_dilated(
        x, k, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"), precision=precision)
    _, kernel_vjp = jax.vjp(direct, kernel)
    return g_x, kernel_vjp(g)[0], jnp.zeros_like(filters), jnp.zeros_like(filters_flipped)


winograd_conv3x3_same.defvjp(_winograd_fwd, _winograd_bwd)
