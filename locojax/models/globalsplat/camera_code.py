"""The per-view camera code of eqs. 7-8 (official `PatchViewPE`).

    e_i = W_proj [ MLP_K(phi(K_i)) ; PE(o_i) ]

phi(K) = [log(fx / W), log(fy / H), cx / W, cy / H] (resolution-normalised intrinsics, log focal);
MLP_K is Linear(4, 64) - GELU - Linear(64, 64) - GELU; PE(o) = [o, sin(2^k pi o), cos(2^k pi o)]
for k < 4 (27 values; the official layout: all sines band-major then all cosines).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from locojax.models.common.layers import TORCH_DEFAULT_INIT, dense, gelu

FOURIER_BANDS = 4
K_HIDDEN = 64


def fourier_encode(o, bands: int = FOURIER_BANDS):
    """[..., 3] -> [..., 3 * (1 + 2 * bands)] = [o, sin(2^k pi o) (k-major), cos(2^k pi o)]."""
    freqs = (2.0 ** jnp.arange(bands, dtype=o.dtype)) * jnp.pi
    x = o[..., None, :] * freqs[:, None]  # [..., bands, 3]
    sincos = jnp.concatenate([jnp.sin(x), jnp.cos(x)], axis=-2)
    return jnp.concatenate([o, sincos.reshape(*o.shape[:-1], -1)], axis=-1)


def intrinsics_features(K_norm):
    """[..., 3, 3] normalised intrinsics -> [..., 4] phi(K) = [log fx, log fy, cx, cy] (normalised)."""
    fx = jnp.maximum(K_norm[..., 0, 0], 1e-8)
    fy = jnp.maximum(K_norm[..., 1, 1], 1e-8)
    return jnp.stack([jnp.log(fx), jnp.log(fy), K_norm[..., 0, 2], K_norm[..., 1, 2]], axis=-1)


class CameraCode(nn.Module):
    """[..., 4, 4] c2w and [..., 3, 3] normalised K -> [..., token_dim] per-view code (eq. 7)."""

    token_dim: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, c2w, K_norm):
        kemb = intrinsics_features(K_norm)
        kemb = gelu(dense(K_HIDDEN, "k_mlp_0", self.dtype, kernel_init=TORCH_DEFAULT_INIT)(kemb))
        kemb = gelu(dense(K_HIDDEN, "k_mlp_2", self.dtype, kernel_init=TORCH_DEFAULT_INIT)(kemb))
        o_enc = fourier_encode(c2w[..., :3, 3])
        view_in = jnp.concatenate([kemb, o_enc.astype(kemb.dtype)], axis=-1)
        return dense(self.token_dim, "proj", self.dtype, kernel_init=TORCH_DEFAULT_INIT)(view_in)
