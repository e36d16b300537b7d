"""Multi-head scaled dot-product attention with an optional additive bias, computed exactly in
query chunks when asked (memory O(chunk x keys) instead of O(queries x keys) per head).

    out = multihead_attention(q, k, v, heads, bias=None, implementation=None, query_chunk=None)

q [B, Nq, D], k [B, Nk, D], v [B, Nk, Dv] -> [B, Nq, Dv]; heads are split from the channel axis as
torch's `.view(B, N, H, dh)`; scale 1/sqrt(dh) as `F.scaled_dot_product_attention`. `bias` is added
to the logits and must broadcast to [B, H, Nq, Nk] (e.g. [B, 1, Nq, Nk]: one map shared by every
head, LocusGS eq. 24); gradients flow into it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def multihead_attention(q, k, v, heads: int, *, bias=None, implementation=None, query_chunk=None):
    """See the module docstring.

    Args:
      implementation: None (XLA, any backend) or "cudnn" (fused flash attention on NVIDIA GPUs,
        bf16/fp16 only), passed to `jax.nn.dot_product_attention`.
      query_chunk: on the XLA path, a positive int computes the attention `query_chunk` queries at a
        time (`query_chunked_attention`); None/0 = all queries at once. cuDNN's fused kernel never
        materialises the logits, so the chunking is skipped there.
    """
    if query_chunk and implementation is None and q.shape[1] > query_chunk:
        return query_chunked_attention(q, k, v, heads, int(query_chunk), bias=bias)
    return _attention(q, k, v, heads, bias, implementation)


def _bias_4d(bias, b: int, nq: int, nk: int):
    """bias broadcastable to [B, H, Nq, Nk] -> rank 4 with its broadcast axes kept at size 1."""
    bias = jnp.asarray(bias)
    if bias.ndim > 4:
        raise ValueError(f"attention bias has rank {bias.ndim}; expected <= 4 ([B, H, Nq, Nk])")
    bias = bias.reshape((1,) * (4 - bias.ndim) + bias.shape)
    if bias.shape[2] not in (1, nq) or bias.shape[3] not in (1, nk) or bias.shape[0] not in (1, b):
        raise ValueError(f"attention bias of shape {bias.shape} does not broadcast to [{b}, H, {nq}, {nk}]")
    return bias


def _attention(q, k, v, heads: int, bias=None, implementation=None):
    b, nq, d = q.shape
    nk, dv = k.shape[1], v.shape[-1]
    if bias is not None:
        # jax.nn.dot_product_attention wants the bias as [B, N(heads), T, S] (broadcastable).
        bias = _bias_4d(bias, b, nq, nk).astype(q.dtype)
    out = jax.nn.dot_product_attention(
        q.reshape(b, nq, heads, d // heads), k.reshape(b, nk, heads, d // heads),
        v.reshape(b, nk, heads, dv // heads), bias=bias, implementation=implementation,
    )
    return out.reshape(b, nq, dv)


def query_chunked_attention(q, k, v, heads: int, chunk: int, *, bias=None):
    """Exact attention, `chunk` queries at a time: q [B, Nq, D], k/v [B, Nk, D] -> [B, Nq, Dv].

    Softmax normalises each query row over the keys, so splitting the queries is exact (no online
    softmax needed). The queries (and the bias rows, when the bias has a query axis) are zero-padded
    to a multiple of `chunk` (pad rows are finite and sliced off, so they get no gradient) and
    `lax.map` runs the chunks in sequence, bounding the [B, H, chunk, Nk] logits to one chunk. The
    chunk body is under `jax.checkpoint`, so the backward pass recomputes each chunk's probabilities
    instead of saving all Nq x Nk of them; `prevent_cse=False` is safe inside a loop (jax docs).
    """
    if chunk <= 0:
        raise ValueError(f"attention query chunk must be positive, got {chunk}")
    b, nq, d = q.shape
    num_chunks = -(-nq // chunk)
    pad = num_chunks * chunk - nq

    def split(x):  # [B, Nq, ...] -> [C, B, chunk, ...]
        x = jnp.pad(x, ((0, 0), (0, pad)) + ((0, 0),) * (x.ndim - 2))
        return jnp.moveaxis(x.reshape((x.shape[0], num_chunks, chunk) + x.shape[2:]), 1, 0)

    qs = split(q)
    if bias is None:
        body = jax.checkpoint(lambda qc: _attention(qc, k, v, heads), prevent_cse=False)
        out = jax.lax.map(body, qs)
    else:
        bias = _bias_4d(bias, b, nq, k.shape[1])
        if bias.shape[2] == 1:  # no query axis: every chunk reads the same bias
            body = jax.checkpoint(lambda qc: _attention(qc, k, v, heads, bias), prevent_cse=False)
            out = jax.lax.map(body, qs)
        else:
            bs = jnp.moveaxis(split(jnp.moveaxis(bias, 2, 1)), 2, 3)  # [C, B', chunk, H', Nk] -> [C, B', H', chunk, Nk]
            body = jax.checkpoint(lambda qb: _attention(qb[0], k, v, heads, qb[1]), prevent_cse=False)
            out = jax.lax.map(body, (qs, bs))
    return jnp.moveaxis(out, 0, 1).reshape(b, num_chunks * chunk, -1)[:, :nq]
