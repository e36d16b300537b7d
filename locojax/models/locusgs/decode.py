"""Head activations (official TokenGS head; LocusGS anchor-centred positions).

raw [B, N, G, 14] = (pos 3, rgb 3, scale 3, quat 4, opacity 1) ->
  position  TokenGS: sign*expm1(x) + (0, 0, 1);  LocusGS: mu + r * sign*expm1(x) (no z offset)
  scale     min(exp(x - (1 - ln 0.075)), 0.075), log-scale clamped to +-10 (code)
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
POS_CLAMP = 100.0     # head offsets (code)
CENTRE_CLAMP = 1000.0  # final centres (code)


def decode_positions(raw_pos, mu, radius, *, anchored: bool):
    off = pos_act(jnp.clip(raw_pos, -math.log1p(POS_CLAMP), math.log1p(POS_CLAMP)))
    if anchored:
        pos = mu[:, :, None, :] + radius[:, :, None, None] * off
    else:
        pos = off + jnp.asarray([0.0, 0.0, 1.0], off.dtype)
    return jnp.clip(pos, -CENTRE_CLAMP, CENTRE_CLAMP)


def decode(raw, mu, radius, *, anchored: bool, scale_max: float = SCALE_MAX) -> Gaussians:
    """raw [B, N, G, 14] (float32) -> Gaussians [B, N * G] (sh degree 0).

    scale_max: the scale cap (official 0.075 scene units, sized for 256x448 images; the tiny presets
    raise it so that a Gaussian covers as many pixels at 64x64 as the official one at full size)."""
    raw = raw.astype(jnp.float32)
    b, n, g, _ = raw.shape
    pos = decode_positions(raw[..., 0:3], mu, radius, anchored=anchored)
    rgb = 0.5 * jnp.tanh(raw[..., 3:6]) + 0.5
    log_s = jnp.clip(raw[..., 6:9] - (1.0 - math.log(scale_max)), -10.0, 10.0)
    scales = jnp.minimum(jnp.exp(log_s), scale_max)
    q = raw[..., 9:13]
    q = q / jnp.maximum(jnp.linalg.norm(q, axis=-1, keepdims=True), 1e-4)
    opa = jax.nn.sigmoid(raw[..., 13] - 2.0)
    flat = lambda x: x.reshape((b, n * g) + x.shape[3:])  # noqa: E731
    return Gaussians(means=flat(pos), quats=flat(q), scales=flat(scales), opacities=flat(opa),
                     sh=flat(((rgb - 0.5) / SH_C0)[..., None, :]))
