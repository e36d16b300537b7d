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

from locojax.models.common.precision import PrecisionPolicy
from locojax.models.globalsplat.config import ModelConfig
from locojax.models.globalsplat.decoder import CandidateHeads, Candidates
from locojax.models.globalsplat.encoder import SlotEncoder
from locojax.models.globalsplat.tokenizer import Tokenizer


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """What `GlobalSplatNet` needs; `NetConfig.from_model` derives it from `config.ModelConfig` (where
    the defaults live), so no value here has a default of its own."""

    num_latents: int
    dim_latents: int
    dim_rgb: int
    dim_rays: int
    patch_size: int
    rounds: int
    self_attention_per_round: int
    num_heads: int
    num_candidates: int
    sh_degree: int
    opacity_offset: float
    log_scale_offset: float
    single_stream: bool
    camera_code: bool
    remat: bool
    precision: PrecisionPolicy  # parts "tokenizer", "encoder", "heads" (config.PRECISION_PARTS)
    attention_impl: Any  # None (XLA) or "cudnn" (GPU flash attention, bf16)
    attention_query_chunk: Any  # queries per attention chunk on the XLA path; None: unchunked

    @classmethod
    def from_model(cls, m: ModelConfig, *, precision: PrecisionPolicy, remat: bool) -> "NetConfig":
        return cls(
            num_latents=m.num_latents, dim_latents=m.dim_latents, dim_rgb=m.dim_rgb, dim_rays=m.dim_rays,
            patch_size=m.patch_size, rounds=m.rounds, self_attention_per_round=m.self_attention_per_round,
            num_heads=m.num_heads, num_candidates=m.num_candidates, sh_degree=m.sh_degree,
            opacity_offset=m.opacity_offset, log_scale_offset=m.log_scale_offset,
            single_stream=m.single_stream, camera_code=m.camera_code, remat=bool(remat), precision=precision,
            attention_impl=_attention_impl(m.attention_impl),
            attention_query_chunk=_query_chunk(m.attention_query_chunk),
        )


def _query_chunk(value):
    if value in (None, 0):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.model.attention_query_chunk={value!r}: expected a positive int, or 0/None "
                         "for unchunked attention")
    return int(value)


def _attention_impl(name):
    if name in (None, "", "xla"):
        return None
    if name != "cudnn":
        raise ValueError(f"config.model.attention_impl={name!r}: expected 'xla' or 'cudnn'")
    return name


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
        dt = c.precision.dtype
        tokens = Tokenizer(c.patch_size, c.dim_rgb, c.dim_rays, c.camera_code, dt("tokenizer"), name="tokenizer")(
            images, c2w, K_norm)
        scene = self.param("scene_tokens", _scene_token_init(c.num_latents, c.dim_latents),
                           (c.num_latents, c.dim_latents), jnp.float32)
        state = jnp.broadcast_to(scene[None], (images.shape[0],) + scene.shape).astype(dt("encoder"))
        app, geo = SlotEncoder(c.dim_latents, c.dim_rgb + c.dim_rays, c.num_heads, c.rounds,
                               c.self_attention_per_round, c.single_stream, c.remat, dt("encoder"),
                               c.attention_impl, c.attention_query_chunk,
                               name="slot_encoder")(state, tokens.astype(dt("encoder")))
        return CandidateHeads(c.dim_latents, c.num_candidates, c.sh_degree, c.opacity_offset,
                              c.log_scale_offset, dt("heads"), name="gaussian_decoder")(
            app.astype(dt("heads")), geo.astype(dt("heads")))
