"""6D rotations (Zhou et al.) as the official renderer reads them, and their quaternions."""

from __future__ import annotations

import jax.numpy as jnp

from locojax.models.common.frames import matrix_to_quaternion


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


def rotation_6d_to_quaternion(d6):
    """[..., 6] -> [..., 4] (w, x, y, z)."""
    return matrix_to_quaternion(rotation_6d_to_matrix(d6))
