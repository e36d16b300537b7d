"""The dual-branch latent encoder (paper sec. 3.3, eqs. 10-11; official `DualStreamSlotEncoder`).

Slot layout along the token axis (per scene), as in the official code:

    [ aux queries (4) | scene tokens (M) | global scale token (1) | slot registers (4) ]

The aux queries and the scale token take part in attention but are not decoded; the slot
registers are frozen with respect to cross-attention and its MLP (their deltas are masked) but
are updated by self-attention. The memory the slots cross-attend is
[ memory registers (4) | all patch tokens of all views ] - its length grows with the number of
views, the slots do not: the Gaussian count is independent of the number of input views.

Each of the B rounds runs, per stream (geometry, appearance): cross-attention of the slots to the
memory, an MLP, then L self-attention blocks (eq. 11); then the two streams exchange information
through a 2-layer mixer MLP with LayerScaled residuals (the "PairAdapter"; eq. after 11). The
paper's eq. 10 projection is a LayerNorm + Linear per stream.

`single_stream=True` is Table 5's "single-stream" ablation: one stream (widen `dim_latents` in the
config to keep the parameter count comparable), no mixer; both decoder heads read it.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.attention import multihead_attention
from locojax.models.common.layers import (
    LayerScale,
    SelfAttentionBlock,
    dense,
    gelu,
    layer_norm,
)

NUM_AUX_QUERIES = 4
NUM_MEM_REGS = 4
NUM_SLOT_REGS = 4


class StreamRound(nn.Module):
    """One stream's round: slots [B, S, D] cross-attend memory [B, T, Dm], MLP, self-attention tower."""

    dim: int
    heads: int
    num_self_attention: int
    mlp_ratio: float = 4.0
    dtype: Any = jnp.float32
    attention_impl: Any = None
    attention_query_chunk: Any = None  # queries per attention chunk (XLA path); None/0: all at once

    @nn.compact
    def __call__(self, slots, memory, reg_mask):
        d = self.dim
        slots_in = layer_norm("slots_ln", self.dtype)(slots)
        mem_in = layer_norm("mem_ln", self.dtype)(memory)
        q = dense(d, "lat_q", self.dtype)(slots_in)
        k = dense(d, "mem_k", self.dtype)(mem_in)
        v = dense(d, "mem_v", self.dtype)(mem_in)
        context = dense(d, "out_proj", self.dtype)(multihead_attention(
            q, k, v, self.heads, implementation=self.attention_impl, query_chunk=self.attention_query_chunk))
        updated = slots + LayerScale(d, 1e-3, name="attn_ls")(context) * reg_mask
        hidden = int(round(d * self.mlp_ratio))
        h = layer_norm("post_ln", self.dtype)(updated)
        h = dense(d, "mlp_2", self.dtype)(gelu(dense(hidden, "mlp_0", self.dtype)(h)))
        x = updated + LayerScale(d, 1e-3, name="mlp_ls")(h) * reg_mask
        for i in range(self.num_self_attention):
            x = SelfAttentionBlock(d, self.heads, self.mlp_ratio, 1e-2, self.dtype, self.attention_impl,
                                   self.attention_query_chunk, name=f"tower_{i}")(x)
        return x


def remat_round(round_def: StreamRound):
    """A StreamRound call `f(bound_round, slots, memory, reg_mask)` whose backward pass recomputes the
    round's activations instead of keeping them from the forward pass (rematerialisation).

    Why not `nn.remat`/`jax.checkpoint`: their recomputation is kept apart from the forward pass
    only by optimization barriers, and XLA:CPU expands (removes) those at the end of its HLO
    pipeline, before layout assignment, the later simplification/CSE passes and scheduling (XLA:GPU
    expands them only after scheduling). On CPU the recomputed forward is then merged back into the
    original one and every activation is stored anyway: the 16k encoder's fwd+bwd compiled to the
    same temp memory with and without `nn.remat` (45.6 vs 45.4 GiB), a toy 8-layer MLP to 880 MiB
    with or without `jax.checkpoint`; with this function 352 MiB, and the encoder 3.7 GiB (chunked).
    Here the backward recomputes from the saved inputs after adding `0 * g[0]` (g = the output
    cotangent) to them: numerically a no-op for a finite cotangent (x + 0 = x), but XLA cannot
    prove it, so the recomputation is neither merged with the forward nor scheduled before the
    cotangent exists. With a non-finite cotangent the gradients are non-finite either way.
    `round_def` is an unbound StreamRound with the same attributes (used to re-apply the round).
    """
    def f(mdl, slots, memory, reg_mask):
        return mdl(slots, memory, reg_mask)

    def fwd(mdl, slots, memory, reg_mask):
        return f(mdl, slots, memory, reg_mask), (mdl.variables["params"], slots, memory, reg_mask)

    def bwd(residuals, g):
        tie = jnp.zeros((), g.dtype) * g.reshape(-1)[0]
        params, slots, memory, reg_mask = jax.tree_util.tree_map(
            lambda a: a + tie.astype(a.dtype), residuals)
        _, vjp = jax.vjp(lambda p, s, m, r: round_def.apply({"params": p}, s, m, r),
                         params, slots, memory, reg_mask)
        params_t, slots_t, memory_t, mask_t = vjp(g)
        return {"params": params_t}, slots_t, memory_t, mask_t

    return nn.custom_vjp(f, forward_fn=fwd, backward_fn=bwd)


class PairAdapter(nn.Module):
    """The 2-layer mixer MLP fusing the geometry and appearance streams (residual, LayerScaled)."""

    dim: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, geo, tex):
        mixed = jnp.concatenate([layer_norm("ln_g", self.dtype)(geo), layer_norm("ln_t", self.dtype)(tex)], -1)
        mixed = dense(2 * self.dim, "mlp_2", self.dtype)(gelu(dense(self.dim, "mlp_0", self.dtype)(mixed)))
        geo_delta, tex_delta = jnp.split(mixed, 2, axis=-1)
        return (geo + LayerScale(self.dim, 1e-3, name="ls_g")(geo_delta),
                tex + LayerScale(self.dim, 1e-3, name="ls_t")(tex_delta))


class SlotEncoder(nn.Module):
    """Latent tokens [B, M, D] + patch tokens [B, V, P, Dm] -> (appearance, geometry) [B, M, D] each."""

    dim: int
    memory_dim: int
    heads: int
    rounds: int
    num_self_attention: int
    single_stream: bool = False
    remat: bool = False
    dtype: Any = jnp.float32
    attention_impl: Any = None
    attention_query_chunk: Any = None

    @nn.compact
    def __call__(self, state, tokens):
        b, m, d = state.shape
        if d != self.dim:
            raise ValueError(f"latent tokens have width {d}, the encoder expects {self.dim}")
        if self.dim % self.heads:
            raise ValueError(f"dim_latents={self.dim} is not divisible by num_heads={self.heads}")
        trunc = nn.initializers.truncated_normal(stddev=0.02)
        aux = self.param("aux_query_tokens", trunc, (1, NUM_AUX_QUERIES, d), jnp.float32)
        scale_emb = self.param("scale_emb", trunc, (1, 1, d), jnp.float32)
        slot_regs = self.param("slot_regs", trunc, (1, NUM_SLOT_REGS, d), jnp.float32)
        mem_regs = self.param("mem_regs", trunc, (1, NUM_MEM_REGS, self.memory_dim), jnp.float32)

        def bank(p, n):
            return jnp.broadcast_to(p, (b, n, p.shape[-1])).astype(state.dtype)

        slots = jnp.concatenate([bank(aux, NUM_AUX_QUERIES), state, bank(scale_emb, 1),
                                 bank(slot_regs, NUM_SLOT_REGS)], axis=1)
        memory = tokens.reshape(b, -1, tokens.shape[-1])
        memory = jnp.concatenate([bank(mem_regs, NUM_MEM_REGS).astype(memory.dtype), memory], axis=1)
        num_slots = slots.shape[1]
        reg_mask = (jnp.arange(num_slots) < num_slots - NUM_SLOT_REGS).astype(self.dtype)[None, :, None]

        def project(name):  # eq. 10: LayerNorm + Linear per stream
            x = layer_norm(f"{name}_0", self.dtype)(slots)
            return dense(d, f"{name}_1", self.dtype)(x)

        def run_round(name, x):
            block = StreamRound(d, self.heads, self.num_self_attention, dtype=self.dtype,
                                attention_impl=self.attention_impl,
                                attention_query_chunk=self.attention_query_chunk, name=name)
            if not self.remat:
                return block(x, memory, reg_mask)
            return remat_round(block.clone(parent=None, name=None))(block, x, memory, reg_mask)

        geo = project("slot_to_geo")
        tex = None if self.single_stream else project("slot_to_tex")
        for r in range(self.rounds):
            geo = run_round(f"geo_rounds_{r}", geo)
            if not self.single_stream:
                tex = run_round(f"tex_rounds_{r}", tex)
                geo, tex = PairAdapter(d, self.dtype, name=f"pair_adapters_{r}")(geo, tex)
        scene = slice(NUM_AUX_QUERIES, NUM_AUX_QUERIES + m)
        if self.single_stream:
            return geo[:, scene], geo[:, scene]
        return tex[:, scene], geo[:, scene]
