"""Head activations (official TokenGS head; LocusGS anchor-centred positions).

raw [B, N, G, 14] = (pos 3, rgb 3, scale 3, quat 4, opacity 1) ->
  position  TokenGS: sign*expm1(x) + (0, 0, 1);  LocusGS: mu + r * sign*expm1(x) (no z offset);
            sign*expm1 clamped to +-1000 (`pos_act`, LocusGS code)
  scale     min(exp(clip(x, -10, 10) - (1 - ln 0.075)), 0.075) (the code clips the raw value)
  opacity   sigmoid(x - 2);  quaternion x / max(|x|, 1e-4);  colour 0.5 tanh(x) + 0.5 (as SH DC)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from locojax.models.locusgs.network import pos_act
from locojax.types import Gaussians

SCALE_MAX = 0.075
SH_C0 = 0.28209479177387814
RAW_SCALE_CLAMP = 10.0  # the code clips the raw log-scale before the shift


def decode_positions(raw_pos, mu, radius, *, anchored: bool, z_offset: float = 1.0):
    """raw [B, N, G, 3], mu [B, N, 3], radius [B, N] -> centres [B, N, G, 3].

    anchored: LocusGS `compose_gaussian_xyz` "radius_scaled_offset", mu + r * pos_act(raw).
    Otherwise pos_act(raw) + (0, 0, z_offset): TokenGS adds z + 1 (`gaussian_z_offset`); LocusGS's
    "free_center" ablation adds nothing (z_offset=0)."""
    off = pos_act(raw_pos)
    if anchored:
        return mu[:, :, None, :] + radius[:, :, None, None] * off
    return off + jnp.asarray([0.0, 0.0, z_offset], off.dtype)


def decode(raw, mu, radius, *, anchored: bool, z_offset: float = 1.0, scale_max: float = SCALE_MAX) -> Gaussians:
    """raw [B, N, G, 14] (float32) -> Gaussians [B, N * G] (sh degree 0).

    scale_max: the scale cap (official 0.075 scene units, sized for 256x448 images; the tiny presets
    raise it so that a Gaussian covers as many pixels at 64x64 as the official one at full size)."""
    raw = raw.astype(jnp.float32)
    b, n, g, _ = raw.shape
    pos = decode_positions(raw[..., 0:3], mu, radius, anchored=anchored, z_offset=z_offset)
    rgb = 0.5 * jnp.tanh(raw[..., 3:6]) + 0.5
    log_s = jnp.clip(raw[..., 6:9], -RAW_SCALE_CLAMP, RAW_SCALE_CLAMP) - (1.0 - math.log(scale_max))
    scales = jnp.minimum(jnp.exp(log_s), scale_max)
    q = raw[..., 9:13]
    q = q / jnp.maximum(jnp.linalg.norm(q, axis=-1, keepdims=True), 1e-4)
    opa = jax.nn.sigmoid(raw[..., 13] - 2.0)
    flat = lambda x: x.reshape((b, n * g) + x.shape[3:])  # noqa: E731
    return Gaussians(means=flat(pos), quats=flat(q), scales=flat(scales), opacities=flat(opa),
                     sh=flat(((rgb - 0.5) / SH_C0)[..., None, :]))
