"""Eq. 5: raw head outputs -> Gaussians, with dead (padding) rows made inert.

raw [B, N, 38] = [alpha 1 | offset 3 | scale 3 | quaternion 4 | SH 27], VolSplat's layout
(encoder_volsplat.py, gaussian_adapter_depth.py): the quaternion is in VolSplat's (x, y, z, w) order
(its build_covariance reads scipy order) and is returned as our (w, x, y, z); SH are colour-major
(3 x 9) and returned [N, 9, 3].

  mu    = x_a + offset_voxels * v * (sigmoid(o) - 1/2)        (+-1.5 v)
  alpha = sigmoid(alpha_raw)
  s     = clip(softplus(s_raw - 4), scale_min, scale_max)
  q     = q_raw / (|q_raw| + 1e-8)
  SH    = raw * [1, 0.025 x 3, 0.00625 x 5] (0.1 * 0.25^l), DC replaced by (mean RGB - 0.5) / C0

Dead rows (no point in the voxel): opacity 0, centre moved to DEAD_POSITION (out of every view of a
scene near the origin), unit quaternion, scale_min, SH 0; their values carry no gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.types import Gaussians

SH_C0 = 0.28209479177387814
DEAD_POSITION = 1e8  # metres on every axis; opacity 0 culls them anyway (< 1/255)


def sh_mask(degree: int):
    """[K] multipliers 0.1 * 0.25^l of degree l (DC: 1), VolSplat's `sh_mask`."""
    return jnp.concatenate([jnp.full((2 * l + 1,), 1.0 if l == 0 else 0.1 * 0.25 ** l, jnp.float32)
                            for l in range(degree + 1)])


def decode_gaussians(raw, positions, rgb, live, *, voxel_size: float, sh_degree: int, scale_min: float,
                     scale_max: float, offset_voxels: float):
    """raw [B, N, 11 + 3K], positions [B, N, 3] anchor means, rgb [B, N, 3] anchor mean colour,
    live [B, N] bool -> (Gaussians [B, N, ...], offsets [B, N, 3] = mu - x_a)."""
    raw = raw.astype(jnp.float32)
    k = (sh_degree + 1) ** 2
    a_raw, o_raw, s_raw, q_raw, c_raw = jnp.split(raw, [1, 4, 7, 11], axis=-1)
    if c_raw.shape[-1] != 3 * k:
        raise ValueError(f"decode_gaussians: raw has {raw.shape[-1]} channels, expected {11 + 3 * k}")
    offsets = offset_voxels * voxel_size * (jax.nn.sigmoid(o_raw) - 0.5)
    means = positions + offsets
    opacities = jax.nn.sigmoid(a_raw[..., 0])
    scales = jnp.clip(jax.nn.softplus(s_raw - 4.0), scale_min, scale_max)
    q = q_raw / (jnp.linalg.norm(q_raw, axis=-1, keepdims=True) + 1e-8)
    quats = jnp.concatenate([q[..., 3:], q[..., :3]], axis=-1)  # (x, y, z, w) -> (w, x, y, z)
    sh = jnp.swapaxes(c_raw.reshape(c_raw.shape[:-1] + (3, k)), -1, -2) * sh_mask(sh_degree)[:, None]
    sh = sh.at[..., 0, :].set((rgb - 0.5) / SH_C0)

    m = live[..., None]
    g = Gaussians(
        means=jnp.where(m, means, DEAD_POSITION),
        quats=jnp.where(m, quats, jnp.array([1.0, 0.0, 0.0, 0.0], jnp.float32)),
        scales=jnp.where(m, scales, scale_min),
        opacities=jnp.where(live, opacities, 0.0),
        sh=jnp.where(m[..., None], sh, 0.0),
    )
    return g, jnp.where(m, offsets, 0.0)
