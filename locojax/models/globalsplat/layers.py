"""Transformer building blocks shaped like the official PyTorch modules (so weights convert 1:1).

Porting notes: torch LayerNorm eps is 1e-5 (flax's default is 1e-6); torch GELU is exact
(`approximate=False`); attention scale is 1/sqrt(head_dim) as in `F.scaled_dot_product_attention`.
Sub-module names follow the torch attribute names (`name.<i>` becomes `name_<i>`), which is what
`convert.py` relies on.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

TORCH_LN_EPS = 1e-5
# The encoder's Linear layers are re-initialised with trunc_normal(std=0.02), biases zero (official
# `_init_encoder_weights`).
ENCODER_INIT = nn.initializers.truncated_normal(stddev=0.02)


def gelu(x):
    return nn.gelu(x, approximate=False)


def layer_norm(name: str, dtype: Any) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=TORCH_LN_EPS, dtype=dtype, param_dtype=jnp.float32, name=name)


def dense(features: int, name: str, dtype: Any, *, use_bias: bool = True,
          kernel_init=ENCODER_INIT) -> nn.Dense:
    return nn.Dense(features, use_bias=use_bias, dtype=dtype, param_dtype=jnp.float32,
                    kernel_init=kernel_init, bias_init=nn.initializers.zeros, name=name)


class LayerScale(nn.Module):
    """x * gamma, gamma [D] initialised to `init_value` (CaiT/DINOv2 LayerScale)."""

    dim: int
    init_value: float

    @nn.compact
    def __call__(self, x):
        gamma = self.param("gamma", nn.initializers.constant(self.init_value), (self.dim,), jnp.float32)
        return x * gamma.astype(x.dtype)


def multihead_attention(q, k, v, heads: int, implementation=None, query_chunk=None):
    """q [B, Nq, D], k/v [B, Nk, D] -> [B, Nq, D]; heads split from D (torch `.view(B, N, H, dh)`).

    `implementation`: None (XLA, any backend) or "cudnn" (fused flash attention on NVIDIA GPUs,
    bf16/fp16 only), passed to `jax.nn.dot_product_attention`.

    `query_chunk`: on the XLA path, a positive int computes the attention `query_chunk` queries
    at a time (`query_chunked_attention`: exact, memory O(query_chunk x Nk) instead of O(Nq x Nk)
    per head); None/0 = all queries at once. cuDNN's fused kernel never materialises the logits,
    so the chunking is skipped there."""
    if query_chunk and implementation is None and q.shape[1] > query_chunk:
        return query_chunked_attention(q, k, v, heads, int(query_chunk))
    return _attention(q, k, v, heads, implementation)


def _attention(q, k, v, heads: int, implementation=None):
    b, nq, d = q.shape
    nk = k.shape[1]
    dh = d // heads
    out = jax.nn.dot_product_attention(
        q.reshape(b, nq, heads, dh), k.reshape(b, nk, heads, dh), v.reshape(b, nk, heads, dh),
        implementation=implementation,
    )
    return out.reshape(b, nq, d)


def query_chunked_attention(q, k, v, heads: int, chunk: int):
    """Exact attention, `chunk` queries at a time: q [B, Nq, D], k/v [B, Nk, D] -> [B, Nq, D].

    Softmax normalises each query row over the keys, so splitting the queries is exact (no online
    softmax needed). The queries are zero-padded to a multiple of `chunk` (pad rows attend
    uniformly, are finite, and are sliced off, so they get no gradient) and `lax.map` runs the
    chunks in sequence, which bounds the [B, H, chunk, Nk] logits/probabilities to one chunk.
    The chunk body is under `jax.checkpoint`, so the backward pass recomputes each chunk's
    probabilities from q/k/v instead of saving all Nq x Nk of them as residuals (the 16k model's
    cross-attentions: [2, 8, 2057, 8196] f32 = 1.08 GB per tensor unchunked).
    `prevent_cse=False` is safe inside a loop (jax.checkpoint docs) and avoids optimization barriers.
    """
    if chunk <= 0:
        raise ValueError(f"attention query chunk must be positive, got {chunk}")
    b, nq, d = q.shape
    num_chunks = -(-nq // chunk)
    pad = num_chunks * chunk - nq
    q = jnp.pad(q, ((0, 0), (0, pad), (0, 0)))
    q = jnp.moveaxis(q.reshape(b, num_chunks, chunk, d), 1, 0)   # [C, B, chunk, D]
    body = jax.checkpoint(lambda qc: _attention(qc, k, v, heads), prevent_cse=False)
    out = jax.lax.map(body, q)                                    # [C, B, chunk, D]
    return jnp.moveaxis(out, 0, 1).reshape(b, num_chunks * chunk, d)[:, :nq]


class SelfAttention(nn.Module):
    """timm/DINOv2 `Attention`: fused qkv Linear (output laid out [3, heads, dh]) and `proj`."""

    dim: int
    heads: int
    dtype: Any = jnp.float32
    attention_impl: Any = None
    query_chunk: Any = None  # see `multihead_attention`

    @nn.compact
    def __call__(self, x):
        b, n, d = x.shape
        qkv = dense(3 * self.dim, "qkv", self.dtype)(x).reshape(b, n, 3, d)
        out = multihead_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], self.heads, self.attention_impl,
                                  self.query_chunk)
        return dense(self.dim, "proj", self.dtype)(out)


class Mlp(nn.Module):
    """fc1 -> exact GELU -> fc2 (timm `Mlp`)."""

    dim: int
    hidden: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        return dense(self.dim, "fc2", self.dtype)(gelu(dense(self.hidden, "fc1", self.dtype)(x)))


class SelfAttentionBlock(nn.Module):
    """Pre-norm transformer block with LayerScale (the official `Block`, init_values=1e-2):
    x += ls1(attn(norm1(x))); x += ls2(mlp(norm2(x)))."""

    dim: int
    heads: int
    mlp_ratio: float = 4.0
    init_value: float = 1e-2
    dtype: Any = jnp.float32
    attention_impl: Any = None
    query_chunk: Any = None

    @nn.compact
    def __call__(self, x):
        attn = SelfAttention(self.dim, self.heads, self.dtype, self.attention_impl, self.query_chunk, name="attn")
        h = attn(layer_norm("norm1", self.dtype)(x))
        x = x + LayerScale(self.dim, self.init_value, name="ls1")(h)
        h = Mlp(self.dim, int(round(self.dim * self.mlp_ratio)), self.dtype, name="mlp")(
            layer_norm("norm2", self.dtype)(x))
        return x + LayerScale(self.dim, self.init_value, name="ls2")(h)
