"""The dual-branch Gaussian decoder (eq. 12, appendix 0.B.1; official `TokenCoarseToFine3DGS`).

Per latent token, linear heads give M candidates: the geometry branch (geometry-stream tokens)
gives centres, log-scales, 6D rotation residuals, opacity logits and a gate (importance) logit; the
appearance branch gives SH coefficients. Offsets (Table 6): mean (0, 0, 1.5), log-scale -2, opacity
logit -5, rotation (1, 0, 0, 0, 1, 0).

Where the official code departs from the paper (we follow the code):
* the opacity logit is shifted by -(1 - lambda) log 2 for every candidate during a transition and
  clamped to [-13, 6]; the final opacity is clamped to [0, 0.99];
* log-scales are clamped to [log 1e-4 - 1, log 0.05 + 2] before merging (after the eq. 46 penalty);
* the 6D rotation halves are each normalised (no Gram-Schmidt) in the output; Gram-Schmidt happens
  when converting to a matrix / quaternion;
* the decoder regulariser returned with the Gaussians is 1e-2 (scale + rotation + SH soft-cap),
  computed on all M candidates; the opacity penalty of eq. 44 is not part of it (it lives in
  `locojax.models.globalsplat.losses`).

Static shapes across stages: `decode_stage` returns stage s at its own size P x 2^s;
`decode_padded` returns every stage at the full-capacity size P x G_final: each of the 2^s merged
Gaussians of a token is repeated G_final / 2^s times and all but the first copy get opacity exactly
0 (`active` = False), so a stage-s scene renders exactly as the official stage-s output while the
array shapes never change; the stage is picked by `lax.switch` on the traced stage index.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.globalsplat import losses as gl
from locojax.models.globalsplat import curriculum as cc
from locojax.models.common.layers import dense

STATIC_ROT6 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
SCALE_MIN = 1e-4
SCALE_MAX = 0.05


class Candidates(NamedTuple):
    """Raw per-candidate predictions, each [B, P, M, ...]."""

    pos: jax.Array       # [B, P, M, 3] (before the mean offset)
    log_scale: jax.Array  # [B, P, M, 3] with the -2 offset, not clamped
    rot6: jax.Array      # [B, P, M, 6] residual on STATIC_ROT6
    opacity: jax.Array   # [B, P, M, 1] logit with the -5 offset
    gate: jax.Array      # [B, P, M, 1] importance logits
    sh: jax.Array        # [B, P, M, 3 * K] as (coefficient, rgb), rgb fastest


class DecodedStage(NamedTuple):
    """One stage's Gaussians, [B, P, G, ...] (G = 2^s, or G_final when padded)."""

    means: jax.Array      # [..., 3]
    scales: jax.Array     # [..., 3] linear
    rot6d: jax.Array      # [..., 6] halves normalised
    opacities: jax.Array  # [..., 1]
    sh: jax.Array         # [..., K, 3]
    active: jax.Array     # [...] bool


class CandidateHeads(nn.Module):
    """(appearance tokens, geometry tokens) [B, P, C] -> Candidates."""

    dim: int
    num_candidates: int
    sh_degree: int
    opacity_offset: float
    log_scale_offset: float
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, app_tokens, geo_tokens):
        b, p, _ = geo_tokens.shape
        m = self.num_candidates
        sh_dim = 3 * (self.sh_degree + 1) ** 2
        geo_init = nn.initializers.truncated_normal(stddev=1e-2)
        sh_init = nn.initializers.truncated_normal(stddev=1e-3)
        f32 = lambda x: x.astype(jnp.float32)  # noqa: E731  heads output float32 for the merge
        pos = f32(dense(m * 3, "geo_pos_readout", self.dtype, kernel_init=geo_init)(geo_tokens))
        params = f32(dense(m * 10, "geo_param_readout", self.dtype, kernel_init=geo_init)(geo_tokens))
        sh = f32(dense(m * sh_dim, "sh_readout", self.dtype, kernel_init=sh_init)(app_tokens))
        gate = f32(dense(m, "gate_readout", self.dtype, kernel_init=geo_init)(geo_tokens))
        params = params.reshape(b, p, m, 10)
        return Candidates(
            pos=pos.reshape(b, p, m, 3),
            log_scale=params[..., 0:3] + self.log_scale_offset,
            rot6=params[..., 3:9],
            opacity=params[..., 9:10] + self.opacity_offset,
            gate=gate.reshape(b, p, m, 1),
            sh=sh.reshape(b, p, m, sh_dim),
        )


def decoder_regularizer_terms(cand: Candidates, scale_max: float = SCALE_MAX) -> dict:
    """Eqs. 46-48 on all candidates: scale (log s_max, official 0.05), rotation residual, SH soft-cap."""
    return dict(
        scale=gl.scale_regularizer(cand.log_scale, math.log(scale_max)),
        rotation=gl.rotation_regularizer(cand.rot6),
        sh=gl.sh_softcap_regularizer(cand.sh),
    )


def official_regularizer(cand: Candidates, scale_max: float = SCALE_MAX):
    """The scalar `reg` the official decoder returns: 1e-2 (scale + rotation + SH)."""
    t = decoder_regularizer_terms(cand, scale_max)
    return 1e-2 * (t["scale"] + t["rotation"] + t["sh"])


def _normalise(v, eps: float = 1e-8):
    return v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), eps)


def decode_stage(cand: Candidates, stage: int, mix, *, gate_tau: float = 1.0,
                 mean_offset=(0.0, 0.0, 1.5), scale_max: float = SCALE_MAX) -> DecodedStage:
    """Stage `stage` (static) with transition coefficient `mix` (traced): [B, P, 2^stage, ...].

    `scale_max` is s_max of eq. 46 in canonical units (official 0.05); the clamp keeps the official
    margin of e^2 above it."""
    m = cand.pos.shape[2]
    g = 1 << stage
    if g > m:
        raise ValueError(f"stage {stage} needs {g} Gaussians per token but only {m} candidates exist")
    mix = jnp.asarray(mix, jnp.float32)
    w_curr = cc.gate_weights(cand.gate, g, gate_tau)
    w_prev = cc.gate_weights(cand.gate, g // 2, gate_tau) if stage > 0 else None

    def plain(x):  # eq. 28 (+ eq. 29 with a plain split)
        curr = cc.weighted_reduce(x, w_curr) if g != m else x
        if stage == 0:
            return curr
        prev = cc.weighted_reduce(x, w_prev)
        return (1.0 - mix) * cc.split_plain(prev) + mix * curr

    log_s_full = jnp.clip(cand.log_scale, math.log(SCALE_MIN) - 1.0, math.log(scale_max) + 2.0)
    log_s = cc.merge_log_scales(log_s_full, w_curr)  # eq. 30
    op_full = jnp.clip(cand.opacity - (1.0 - mix) * math.log(2.0), -13.0, 6.0)
    op = cc.merge_opacity_logits(op_full, w_curr)  # eqs. 32-33
    if stage > 0:  # eqs. 29, 31, 34
        log_s = (1.0 - mix) * cc.split_log_scales(cc.merge_log_scales(log_s_full, w_prev)) + mix * log_s
        op = (1.0 - mix) * cc.split_opacity_logits(cc.merge_opacity_logits(op_full, w_prev)) + mix * op

    pos = plain(cand.pos) + jnp.asarray(mean_offset, jnp.float32)
    rot6 = plain(cand.rot6) + jnp.asarray(STATIC_ROT6, jnp.float32)
    rot6 = jnp.concatenate([_normalise(rot6[..., :3]), _normalise(rot6[..., 3:])], axis=-1)
    sh = plain(cand.sh)
    b, p = sh.shape[:2]
    return DecodedStage(
        means=pos,
        scales=jnp.exp(log_s),
        rot6d=rot6,
        opacities=jnp.clip(jax.nn.sigmoid(op), 0.0, 0.99),
        sh=sh.reshape(b, p, g, -1, 3),
        active=jnp.ones((b, p, g), bool),
    )


def pad_stage(dec: DecodedStage, groups_final: int) -> DecodedStage:
    """[B, P, G, ...] -> [B, P, G_final, ...]: repeat each Gaussian, zero the copies' opacity."""
    g = dec.means.shape[2]
    k = groups_final // g
    if k == 1:
        return dec
    rep = lambda x: jnp.repeat(x, k, axis=2)  # noqa: E731
    first = (jnp.arange(groups_final) % k == 0)
    active = rep(dec.active) & first[None, None, :]
    return DecodedStage(rep(dec.means), rep(dec.scales), rep(dec.rot6d),
                        rep(dec.opacities) * active[..., None], rep(dec.sh), active)


def decode_padded(cand: Candidates, stage, mix, final_stage: int, **kw) -> DecodedStage:
    """Traced `stage` in [0, final_stage] -> DecodedStage at full capacity [B, P, 2^final_stage]."""
    g_final = 1 << final_stage
    branches = [lambda c, m_, s=s: pad_stage(decode_stage(c, s, m_, **kw), g_final)
                for s in range(final_stage + 1)]
    if final_stage == 0:
        return branches[0](cand, mix)
    idx = jnp.clip(jnp.asarray(stage, jnp.int32), 0, final_stage)
    return jax.lax.switch(idx, branches, cand, mix)
