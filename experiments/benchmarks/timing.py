"""Wall-clock timing shared by the benchmarks: medians after an untimed warm-up call, and the
float32 square-matmul rate that every model benchmark prints its achieved FLOP/s against."""

from __future__ import annotations

import time

import numpy as np


def timed(fn, *args, repeats: int, warmup: bool = True):
    """(output, median seconds of `repeats` calls, seconds of the untimed warm-up call or None).

    The warm-up (compile on first use, allocation, thread pools) is excluded from the median; a caller
    timing one compiled function on several inputs needs it once, not per input."""
    import jax

    warm = None
    if warmup:
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        warm = time.perf_counter() - t0
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times)), warm


def matmul_gflops_per_s(size: int, repeats: int = 3) -> float:
    """GFLOP/s of a float32 [size, size] @ [size, size] on the default device (2 size^3 FLOPs)."""
    import jax
    import jax.numpy as jnp

    a = jnp.asarray(np.random.default_rng(0).normal(size=(size, size)), jnp.float32)
    _, sec, _ = timed(jax.jit(lambda x: x @ x), a, repeats=repeats)
    return 2.0 * size ** 3 / sec / 1e9
