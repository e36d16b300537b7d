"""`experiments.describe`: parameter counts at abstract shapes equal a real init's, the paper's 84.3M
for globalsplat_16k, and FLOPs from XLA's cost analysis corrected for scan loops (XLA counts a loop
body once: checked against the unrolled function and the analytic count)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.train.flops import count_flops

M = 32
X = jax.ShapeDtypeStruct((M, M), jnp.float32)
MATMUL = 2 * M ** 3  # multiply-adds of one [M, M] @ [M, M]


def _layer(c, w):
    return jnp.tanh(c @ w)


def _unrolled(x, w, n):
    for _ in range(n):
        x = _layer(x, w)
    return x


@pytest.mark.parametrize("name, fn, n", [
    ("scan", lambda x, w: jax.lax.scan(lambda c, _: (_layer(c, w), None), x, None, length=10)[0], 10),
    ("fori_loop", lambda x, w: jax.lax.fori_loop(0, 7, lambda i, c: _layer(c, w), x), 7),
    ("nested scans", lambda x, w: jax.lax.scan(
        lambda c, _: (jax.lax.scan(lambda c2, _: (_layer(c2, w), None), c, None, length=3)[0], None),
        x, None, length=4)[0], 12),
    ("scan under jit and remat", jax.jit(lambda x, w: jax.lax.scan(
        jax.checkpoint(lambda c, _: (_layer(c, w), None)), x, None, length=5)[0]), 5)])
def test_loop_flops_equal_the_unrolled_count(name, fn, n):
    got = count_flops(fn, X, X)
    want = count_flops(lambda x, w: _unrolled(x, w, n), X, X)
    assert want.scans == 0 and want.flops == want.xla_flops
    assert got.xla_flops < want.flops / 2  # XLA alone counts the body once
    # equal up to the loop counter's few integer adds per iteration
    assert got.flops == pytest.approx(want.flops, abs=4 * n + 8), name
    assert n * MATMUL <= got.flops < n * (MATMUL + 3 * M * M)  # matmuls + tanh (+ loop counters)


def test_lax_map_counts_every_element():
    xs = jax.ShapeDtypeStruct((6, M, M), jnp.float32)
    got = count_flops(lambda xs, w: jax.lax.map(lambda x: x @ w, xs), xs, X)
    assert got.flops == pytest.approx(6 * MATMUL, abs=50) and got.xla_flops < 2 * MATMUL


@pytest.fixture(scope="module")
def tiny():
    from locojax.train.describe import describe

    return describe(configs.get_config("globalsplat_tiny"))


def test_tiny_counts_equal_a_real_init(tiny):
    from locojax.models.registry import build_model
    from locojax.train.run import placeholder_batch

    config = configs.get_config("globalsplat_tiny")
    model = build_model(config)
    params = jax.jit(model.init)(jax.random.PRNGKey(0), placeholder_batch(config))
    real = {k: sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(v)) for k, v in params.items()}
    assert tiny["params_per_module"] == real
    assert tiny["num_params"] == sum(real.values()) == tiny["num_trainable_params"]
    assert tiny["params_per_group"] == {"default": tiny["num_params"]} and tiny["num_frozen_params"] == 0
    assert tiny["num_gaussians"] == model.num_gaussians == 256 * 8
    assert 0 < tiny["flops_forward"] < tiny["flops_train_step"]


def test_query_chunked_attention_costs_what_unchunked_does(tiny):
    """Chunking attention queries (a lax.map) changes the schedule, not the arithmetic: the corrected
    count stays within 1% of the unchunked model's, where XLA's own count drops by ~20%."""
    from locojax.train.describe import describe

    config = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(config, ["model.attention_query_chunk=4"])  # divides every query length
    chunked = describe(config)
    assert chunked["scans_corrected"] > tiny["scans_corrected"]
    assert chunked["flops_forward"] == pytest.approx(tiny["flops_forward"], rel=0.01)
    assert chunked["flops_forward_xla"] < 0.9 * tiny["flops_forward"]


def test_16k_json_reports_the_papers_parameter_count(capsys):
    from experiments import describe

    assert describe.main(["--config=globalsplat_16k", "--json", "--noflops"]) == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert d["num_params"] == 84_321_120 and d["num_trainable_params"] == 84_321_120
    assert d["num_gaussians"] == 16_384 and d["num_loss_network_params"] > 0  # LPIPS-VGG, frozen
    assert d["config"] == "globalsplat_16k"


def test_flops_from_a_jit_trace_equal_count_flops():
    """The benchmark's path (one trace and lowering, reused for compiling) gives count_flops' figure."""
    from locojax.train.flops import count_flops_traced

    fn = lambda x, w: jax.lax.scan(lambda c, _: (_layer(c, w), None), x, None, length=4)[0]
    traced = jax.jit(fn).trace(X, X)
    got, want = count_flops_traced(traced.jaxpr, traced.lower()), count_flops(fn, X, X)
    assert (got.flops, got.xla_flops, got.scans) == (want.flops, want.xla_flops, want.scans) and got.scans == 1


def test_cumulative_ops_count_one_op_per_element():
    """XLA's HLO cost analysis counts a cumsum's whole-axis reduce_window as n(n-1) adds (quadratic:
    most of LoCoSplat's 24-view encoder count before this correction); it runs in O(n)."""
    n = 2000
    xs = jax.ShapeDtypeStruct((3, n), jnp.int32)
    got = count_flops(lambda x: jnp.cumsum(x, axis=1) + jax.lax.cummax(x, axis=0), xs)
    assert got.xla_flops >= 3 * n * (n - 1)  # the quadratic count being corrected
    assert got.cumulative == 2 and got.flops == pytest.approx(3 * 3 * n, abs=10)  # 2 ops + the add per element
    inside = count_flops(lambda x: jax.lax.scan(lambda c, r: (c, jnp.cumsum(r)), 0, x)[1], xs)
    assert inside.flops == pytest.approx(3 * n, abs=20) and inside.scans == 1
