"""6D rotations (Zhou et al.) as the official renderer reads them, and their quaternions."""

from __future__ import annotations

import jax.numpy as jnp


def _unit(v, eps: float = 1e-8):
    # torch F.normalize: v / max(|v|, eps)
    return v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), eps)


def rotation_6d_to_matrix(d6):
    """[..., 6] -> [..., 3, 3] by Gram-Schmidt; b1, b2, b3 are the matrix ROWS (PyTorch3D convention,
    which the official `misc.geometry.rotation_6d_to_matrix` follows)."""
    b1 = _unit(d6[..., :3])
    a2 = d6[..., 3:]
    b2 = _unit(a2 - jnp.sum(b1 * a2, axis=-1, keepdims=True) * b1)
    b3 = jnp.cross(b1, b2)
    return jnp.stack([b1, b2, b3], axis=-2)


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


def rotation_6d_to_quaternion(d6):
    """[..., 6] -> [..., 4] (w, x, y, z)."""
    return matrix_to_quaternion(rotation_6d_to_matrix(d6))
