"""The GlobalSplat network: views -> candidates -> Gaussians of one curriculum stage.

    tokens   = Tokenizer(images, c2w, K)                  [B, V, P_img, dim_rays + dim_rgb]
    app, geo = SlotEncoder(scene_tokens, tokens)          [B, M, dim_latents] each
    cand     = CandidateHeads(app, geo)                   [B, M, num_candidates, ...]

`GlobalSplatNet.__call__` returns the raw `Candidates`; `decoder.decode_stage` /
`decoder.decode_padded` turn them into Gaussians (kept outside the module so that tests and the
fixture comparison can decode any stage from one forward pass).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from locojax.models.globalsplat.decoder import CandidateHeads, Candidates
from locojax.models.globalsplat.encoder import SlotEncoder
from locojax.models.globalsplat.tokenizer import Tokenizer


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """Every architecture hyper-parameter (Table 6 defaults = globalsplat_16k)."""

    num_latents: int = 2048
    dim_latents: int = 512
    dim_rgb: int = 512
    dim_rays: int = 256
    patch_size: int = 8
    rounds: int = 4
    self_attention_per_round: int = 2
    num_heads: int = 8
    num_candidates: int = 16
    sh_degree: int = 3
    opacity_offset: float = -5.0
    log_scale_offset: float = -2.0
    single_stream: bool = False
    camera_code: bool = True
    remat: bool = False
    dtype: Any = jnp.float32
    attention_impl: Any = None  # None (XLA) or "cudnn" (GPU flash attention, bf16)
    attention_query_chunk: Any = None  # queries per attention chunk on the XLA path; None/0: unchunked


def _scene_token_init(num: int, dim: int):
    """std 0.02 normal; a bank no larger than its width starts as scaled orthonormal rows (official)."""
    def init(key, shape, dtype=jnp.float32):
        if num <= dim:
            return 0.02 * nn.initializers.orthogonal()(key, (num, dim), dtype)
        return 0.02 * nn.initializers.normal(1.0)(key, shape, dtype)
    return init


class GlobalSplatNet(nn.Module):
    cfg: NetConfig

    @nn.compact
    def __call__(self, images, c2w, K_norm) -> Candidates:
        """images [B, V, H, W, 3] in [0, 1]; c2w [B, V, 4, 4] canonical frame; K_norm [B, V, 3, 3]."""
        c = self.cfg
        tokens = Tokenizer(c.patch_size, c.dim_rgb, c.dim_rays, c.camera_code, c.dtype, name="tokenizer")(
            images, c2w, K_norm)
        scene = self.param("scene_tokens", _scene_token_init(c.num_latents, c.dim_latents),
                           (c.num_latents, c.dim_latents), jnp.float32)
        state = jnp.broadcast_to(scene[None], (images.shape[0],) + scene.shape).astype(c.dtype)
        app, geo = SlotEncoder(c.dim_latents, c.dim_rgb + c.dim_rays, c.num_heads, c.rounds,
                               c.self_attention_per_round, c.single_stream, c.remat, c.dtype,
                               c.attention_impl, c.attention_query_chunk,
                               name="slot_encoder")(state, tokens.astype(c.dtype))
        return CandidateHeads(c.dim_latents, c.num_candidates, c.sh_degree, c.opacity_offset,
                              c.log_scale_offset, c.dtype, name="gaussian_decoder")(app, geo)
