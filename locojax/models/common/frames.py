"""Similarity transforms between a world frame and a model's canonical frame, for cameras and for
Gaussians, with view-dependent colour rotated along.

    frame_c2w, scale = canonical_frame(c2w)            # GlobalSplat eqs. 3-5 (jittable)
    c2w_canonical = cameras_to_frame(c2w, frame_c2w, scale)
    g_world = gaussians_from_frame(g_canonical, frame_c2w, scale)    # exact for SH degree 0-3

A point x_c in the canonical frame is x_w = R (s x_c) + t in the world (R, t = frame_c2w, s = scale).
A Gaussian's colour along world direction d equals its canonical colour along R^T d, so its SH
coefficients of degree l are mixed by the rotation's real Wigner matrix D_l(R) (`rotate_sh`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from locojax.geometry.scene_normalization import globalsplat_frame_jax, to_frame_jax
from locojax.render.sh import sh_bases
from locojax.types import Gaussians

canonical_frame = globalsplat_frame_jax
cameras_to_frame = to_frame_jax


def quat_multiply(a, b):
    """Hamilton product of (w, x, y, z) quaternions [..., 4]."""
    aw, ax, ay, az = jnp.moveaxis(a, -1, 0)
    bw, bx, by, bz = jnp.moveaxis(b, -1, 0)
    return jnp.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                      aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def matrix_to_quaternion(R):
    """[..., 3, 3] rotation -> [..., 4] (w, x, y, z), w >= 0. Picks the best-conditioned of the four
    standard formulas per element (Shepperd), so it is accurate for every rotation."""
    m00, m01, m02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    m10, m11, m12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    m20, m21, m22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    traces = jnp.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22,
                        1 - m00 + m11 - m22, 1 - m00 - m11 + m22], axis=-1)
    cands = jnp.stack([
        jnp.stack([traces[..., 0], m21 - m12, m02 - m20, m10 - m01], -1),
        jnp.stack([m21 - m12, traces[..., 1], m10 + m01, m02 + m20], -1),
        jnp.stack([m02 - m20, m10 + m01, traces[..., 2], m21 + m12], -1),
        jnp.stack([m10 - m01, m02 + m20, m21 + m12, traces[..., 3]], -1),
    ], axis=-2)  # [..., 4 candidates, 4]
    best = jnp.argmax(traces, axis=-1)
    q = jnp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    return q * jnp.where(q[..., :1] < 0, -1.0, 1.0)


_NUM_SAMPLE_DIRS = 32


@functools.lru_cache(maxsize=None)
def _sh_fit(degree: int):
    """Fixed sample directions [S, 3] and the pseudo-inverse [K_l, S] of their degree-l bases."""
    rng = np.random.default_rng(1234 + degree)
    dirs = rng.normal(size=(_NUM_SAMPLE_DIRS, 3))
    dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    lo, hi = degree ** 2, (degree + 1) ** 2
    with jax.ensure_compile_time_eval():  # a constant, also when first called under jit
        basis = np.asarray(sh_bases(degree, jnp.asarray(dirs, jnp.float32)))[:, lo:hi]
    return dirs.astype(np.float32), np.linalg.pinv(basis.astype(np.float64)).astype(np.float32)


def wigner_matrices(R, max_degree: int):
    """Real Wigner matrices of rotation R [..., 3, 3] in the renderer's SH basis (`sh_bases`).

    Returns a list of [..., 2l+1, 2l+1] matrices M_l (l = 1..max_degree) with, for every unit d,
    Y_l(R^T d) = M_l^T Y_l(d) (row vectors: Y_l(R^T d)^T = Y_l(d)^T M_l). Each M_l is the least-squares
    solution over fixed sample directions d_s, exact because the degree-l span is closed under
    rotation; computing it from `sh_bases` keeps it in the renderer's sign and order conventions.
    """
    out = []
    for l in range(1, max_degree + 1):
        dirs, pinv = _sh_fit(l)
        rotated = jnp.einsum("sj,...jk->...sk", jnp.asarray(dirs), R)  # rows d_s^T R = (R^T d_s)^T
        y_rot = sh_bases(l, rotated)[..., l * l:(l + 1) ** 2]  # [..., S, K_l]
        out.append(jnp.einsum("ks,...sj->...kj", jnp.asarray(pinv), y_rot))  # [..., K_l, K_l]
    return out


def rotate_sh(sh, R):
    """SH coefficients [..., N, K, C] of colour functions f(d) -> those of f(R^T d), i.e. the
    coefficients after rotating the Gaussians by R [..., 3, 3] (one rotation per leading index).

    Degrees 0-3 (K = 1, 4, 9, 16); DC is unchanged."""
    k = sh.shape[-2]
    degree = int(round(k ** 0.5)) - 1
    if (degree + 1) ** 2 != k:
        raise ValueError(f"rotate_sh: K={k} SH coefficients is not (degree + 1)**2")
    if degree == 0:
        return sh
    parts = [sh[..., :1, :]]
    for l, m in enumerate(wigner_matrices(R, degree), start=1):
        block = sh[..., l * l:(l + 1) ** 2, :]  # [..., N, K_l, C]
        # f(R^T d) = sum_k c_k Y_k(R^T d) = sum_k c_k sum_j Y_j(d) M[j, k] -> c'_j = sum_k M[j, k] c_k
        parts.append(jnp.einsum("...jk,...nkc->...njc", m.astype(sh.dtype), block))
    return jnp.concatenate(parts, axis=-2)


def gaussians_from_frame(g: Gaussians, frame_c2w, scale) -> Gaussians:
    """Canonical-frame Gaussians [B, N] -> the world frame that `frame_c2w` [B, 4, 4] / `scale` [B]
    describe. Means, scales, rotations and SH (degree <= 3) are transformed exactly, so rendering
    the result with world cameras equals rendering `g` with the cameras mapped into the frame."""
    rot = frame_c2w[:, :3, :3].astype(g.means.dtype)
    s = scale.astype(g.means.dtype)
    means = jnp.einsum("bij,bnj->bni", rot, g.means * s[:, None, None]) + frame_c2w[:, None, :3, 3]
    quats = quat_multiply(matrix_to_quaternion(rot)[:, None, :], g.quats)
    return g.replace(means=means, quats=quats, scales=g.scales * s[:, None, None], sh=rotate_sh(g.sh, rot))
