"""Memory-bounded attention and rematerialisation in GlobalSplat's encoder.

- Query-chunked attention (`common.attention.query_chunked_attention`, `config.model.attention_query_chunk`)
  equals an independent einsum/softmax reference, forward and gradient in q, k and v, with a chunk
  that does not divide the query count; the tiny model's output does not change with a chunk set.
- `model.remat=True` (the encoder's `remat_round`) gives the same gradients as no remat, and on
  XLA:CPU actually lowers the compiled step's temporary memory (`nn.remat` did not: XLA:CPU's CSE
  merged the recomputation back into the forward pass).
"""

import sys
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.models.globalsplat import build
from locojax.models.globalsplat.encoder import SlotEncoder
from locojax.models.common.attention import multihead_attention, query_chunked_attention

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from synthetic_views import random_views, split_batch  # noqa: E402


def reference_attention(q, k, v, heads):
    """softmax(q k^T / sqrt(dh)) v per head, heads split from the feature axis (float64 numpy)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, nq, d = q.shape
    dh = d // heads
    split = lambda x: x.reshape(b, x.shape[1], heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    logits = split(q) @ split(k).transpose(0, 1, 3, 2) / np.sqrt(dh)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ split(v)).transpose(0, 2, 1, 3).reshape(b, nq, d)


@pytest.fixture(scope="module")
def qkv():
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(0), 3)
    return (jax.random.normal(kq, (2, 37, 32)), jax.random.normal(kk, (2, 23, 32)),
            jax.random.normal(kv, (2, 23, 32)))


@pytest.mark.parametrize("chunk", [None, 8, 37, 64])
def test_chunked_attention_forward_matches_reference(qkv, chunk):
    q, k, v = qkv
    out = jax.jit(lambda q, k, v: multihead_attention(q, k, v, 4, query_chunk=chunk))(q, k, v)
    assert out.shape == q.shape
    np.testing.assert_allclose(np.asarray(out), reference_attention(q, k, v, 4), atol=2e-6, rtol=0)


def test_chunked_attention_gradient_matches_unchunked(qkv):
    q, k, v = qkv
    weights = jax.random.normal(jax.random.PRNGKey(3), q.shape)  # a loss that weighs every output

    def loss(fn):
        return lambda q, k, v: jnp.sum(weights * fn(q, k, v))

    full = jax.jit(jax.grad(loss(lambda q, k, v: multihead_attention(q, k, v, 4)), argnums=(0, 1, 2)))
    chunked = jax.jit(jax.grad(loss(lambda q, k, v: query_chunked_attention(q, k, v, 4, 8)), argnums=(0, 1, 2)))
    g_full, g_chunked = full(q, k, v), chunked(q, k, v)
    for name, a, b in zip("qkv", g_full, g_chunked):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-6, rtol=0, err_msg=f"d/d{name}")
    # Central differences of the float64 reference at one q, k and v entry: the gradients are the attention's.
    eps = 1e-4
    arrays = [np.asarray(x, np.float64) for x in (q, k, v)]
    ref_loss = lambda a: float(np.sum(np.asarray(weights, np.float64) * reference_attention(*a, 4)))  # noqa: E731
    for arg, index in ((0, (1, 36, 5)), (1, (0, 22, 31)), (2, (1, 3, 0))):
        hi = [a.copy() for a in arrays]
        lo = [a.copy() for a in arrays]
        hi[arg][index] += eps
        lo[arg][index] -= eps
        numeric = (ref_loss(hi) - ref_loss(lo)) / (2 * eps)
        assert abs(float(g_chunked[arg][index]) - numeric) < 1e-4 * max(1.0, abs(numeric))


def test_chunked_attention_bounds_compiled_memory():
    """Unchunked, logits/probabilities of [1, 2, 1024, 4096] f32 (32 MiB each) are kept for the
    backward pass; chunked by 64, one [1, 2, 64, 4096] chunk (2 MiB) is live at a time."""
    q = jax.ShapeDtypeStruct((1, 1024, 16), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, 4096, 16), jnp.float32)

    def temp_bytes(chunk):
        loss = lambda q, k, v: jnp.sum(jnp.sin(multihead_attention(q, k, v, 2, query_chunk=chunk)))  # noqa: E731
        compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(q, kv, kv).compile()
        mem = compiled.memory_analysis()
        if mem is None:
            pytest.skip("backend has no memory analysis")
        return mem.temp_size_in_bytes

    unchunked, chunked = temp_bytes(None), temp_bytes(64)
    assert unchunked > 64 * 2**20
    assert chunked < 16 * 2**20, (unchunked, chunked)


def _encoder_inputs():
    state = jax.random.normal(jax.random.PRNGKey(1), (2, 10, 32))
    tokens = jax.random.normal(jax.random.PRNGKey(2), (2, 3, 7, 48))
    return state, tokens


ENCODER = dict(dim=32, memory_dim=48, heads=4, rounds=1, num_self_attention=1)  # one round: short compiles


def test_remat_and_chunking_keep_encoder_gradients():
    state, tokens = _encoder_inputs()
    plain = SlotEncoder(**ENCODER)
    params = jax.jit(plain.init)(jax.random.PRNGKey(0), state, tokens)  # eager init: ~13 s of op compiles
    # remat + chunking together (the 16k settings with remat on); chunking alone is covered by the
    # tiny-model test below, remat alone by test_remat_lowers_compiled_encoder_memory's compile
    variants = [SlotEncoder(**ENCODER, remat=True, attention_query_chunk=3)]
    # remat does not change the parameter tree or its initial values
    same = jax.tree_util.tree_map(lambda a, b: bool(jnp.array_equal(a, b)), params,
                                  jax.jit(variants[0].init)(jax.random.PRNGKey(0), state, tokens))
    assert jax.tree_util.tree_all(same)

    def outputs_and_grads(module, p, s, t):
        def loss(p, s, t):
            out = module.apply(p, s, t)
            return sum(jnp.sum(jnp.sin(o)) for o in out), out
        return jax.grad(loss, argnums=(0, 1, 2), has_aux=True)(p, s, t)

    # one jit for all variants: a single (short) compile
    results = jax.jit(lambda p, s, t: [outputs_and_grads(m, p, s, t) for m in [plain] + variants])(
        params, state, tokens)
    ref_grads, ref_out = results[0]
    for grads, out in results[1:]:
        for a, b in zip(out, ref_out):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6, rtol=0)
        for a, b in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(ref_grads)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-6, rtol=1e-5)


def test_remat_lowers_compiled_encoder_memory():
    """Three rounds of 2 x 257 slots x 1024 memory tokens: with remat only the round inputs are kept
    for the backward pass, so the compiled temp memory must drop well below no-remat's (with
    `nn.remat` XLA:CPU kept everything: the same temp memory as no remat)."""
    kw = dict(dim=128, memory_dim=64, heads=4, rounds=3, num_self_attention=1)
    state = jax.ShapeDtypeStruct((2, 248, 128), jnp.float32)
    tokens = jax.ShapeDtypeStruct((2, 4, 256, 64), jnp.float32)

    def temp_bytes(remat):
        enc = SlotEncoder(**kw, remat=remat)
        params = jax.eval_shape(lambda: enc.init(jax.random.PRNGKey(0), jnp.zeros(state.shape),
                                                 jnp.zeros(tokens.shape)))
        loss = lambda p, s, t: sum(jnp.sum(o) for o in enc.apply(p, s, t))  # noqa: E731
        mem = jax.jit(jax.grad(loss)).lower(params, state, tokens).compile().memory_analysis()
        if mem is None:
            pytest.skip("backend has no memory analysis")
        return mem.temp_size_in_bytes

    plain, remat = temp_bytes(False), temp_bytes(True)
    print(f"encoder fwd+bwd temp: {plain / 2**20:.1f} MiB without remat, {remat / 2**20:.1f} MiB with")
    assert remat < 0.6 * plain, (plain, remat)


def test_tiny_model_output_unchanged_with_query_chunk():
    views = jax.tree_util.tree_map(jnp.asarray, random_views(1, 6, 32, 32, seed=4))
    outputs = []
    for chunk in (0, 16):
        config = configs.get_config("globalsplat_tiny")
        config.model.attention_query_chunk = chunk
        model = build(config)
        if not outputs:
            params = jax.jit(model.init)(jax.random.PRNGKey(1), split_batch(random_views(1, 6, 32, 32), 6))
        g = jax.jit(lambda p, v: model.predict(p, v, step=jnp.int32(0), train=False).gaussians)(params, views)
        outputs.append(g)
    assert model.net_cfg.attention_query_chunk == 16  # 73 slots: 5 chunks, the last one padded
    for a, b in zip(jax.tree_util.tree_leaves(outputs[0]), jax.tree_util.tree_leaves(outputs[1])):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5, rtol=1e-5)


def test_query_chunk_config_is_validated():
    config = configs.get_config("globalsplat_tiny")
    config.model.attention_query_chunk = -3
    with pytest.raises(ValueError, match="attention_query_chunk"):
        build(config)
