"""FLOPs of a function from XLA's HLO cost analysis, corrected for loops.

XLA's `HloCostAnalysis` counts the body of a `while` once, whatever its trip count (a `lax.scan` of
10 matmuls reports the FLOPs of one; measured with jax 0.10). Every `scan` (also `lax.map` and a
`fori_loop` with static bounds) has a static length, so the count is corrected from the jaxpr:

    flops(f) = xla(f) + sum over the outermost scans L of f:  length(L) * flops(body(L)) - xla(body(L))

recursively (a scan nested in a scan body is corrected inside `flops(body)`), where `xla(g)` is the
cost analysis of `g` lowered alone. A `while_loop` whose trip count depends on data (the
rasteriser's tile loop) cannot be corrected: its body stays counted once and it is reported in
`FlopCount.while_loops`, so the total is a lower bound when that is > 0.

Cumulative ops (`jnp.cumsum`, cumprod, cummax, cummin, cumlogsumexp) lower to a `reduce_window` whose
window spans the whole axis: the cost analysis of the unoptimised HLO counts n(n-1) operations for an
axis of n (1.5e11 for LoCoSplat's 393,216-row segment ids at 6 views, most of its "3D stage"), while
the compiled op runs in O(n) (a 1.57M-element cumsum takes 27 ms on the 2-core CPU). Each is
corrected to one operation per element: `FlopCount.cumulative` counts them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
from jax.extend import core as jcore


@dataclasses.dataclass
class FlopCount:
    flops: float  # corrected total
    xla_flops: float  # XLA's own count (every loop body once)
    scans: int  # scan loops corrected (each nesting level counted)
    while_loops: int  # data-dependent while loops, bodies counted once
    cumulative: int = 0  # cumulative ops (cumsum, ...) recounted from n(n-1) to n per axis


def _xla_flops(lowered) -> float:
    cost = lowered.cost_analysis() or {}
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return float(cost.get("flops", 0.0))


def _closed_xla_flops(closed, cache: dict) -> float:
    key = str(closed)
    if key not in cache:
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed.in_avals]
        cache[key] = _xla_flops(jax.jit(jcore.jaxpr_as_fun(closed)).lower(*args))
    return cache[key]


CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")


def _cumulative_correction(eqn, cache: dict) -> float:
    """One operation per element instead of XLA's n(n-1) per reduced axis (module docstring)."""
    avals = [v.aval for v in eqn.invars]
    key = (eqn.primitive.name, tuple((a.shape, str(a.dtype)) for a in avals), str(sorted(eqn.params.items())))
    if key not in cache:
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        once = _xla_flops(jax.jit(lambda *xs: eqn.primitive.bind(*xs, **eqn.params)).lower(*args))
        size = 1
        for d in avals[0].shape:
            size *= int(d)
        cache[key] = size - once
    return cache[key]


def _sub_jaxprs(params: dict):
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(item, jcore.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jcore.Jaxpr):
                yield item


def _correction(jaxpr, cache: dict, counts: dict) -> float:
    """FLOPs XLA misses in `jaxpr` because it counts each loop body once."""
    extra = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "scan":
            body = eqn.params["jaxpr"]
            once = _closed_xla_flops(body, cache)
            true_body = once + _correction(body.jaxpr, cache, counts)
            extra += int(eqn.params["length"]) * true_body - once
            counts["scans"] += 1
        elif name in CUMULATIVE:
            extra += _cumulative_correction(eqn, cache)
            counts["cumulative"] += 1
        elif name == "cond" and eqn.params.get("branches_platforms"):
            # `lax.platform_dependent`: the lowered module keeps only this platform's branch.
            branch = eqn.params["branches"][_platform_branch(eqn.params["branches_platforms"])]
            extra += _correction(branch.jaxpr, cache, counts)
        elif name == "pallas_call":
            pass  # a kernel: its body (Ref-typed, run inside one custom call) is not an XLA loop
        else:
            if name == "while":
                counts["while_loops"] += 1
            for sub in _sub_jaxprs(eqn.params):  # jit, remat, custom_vjp, cond, while bodies
                extra += _correction(sub, cache, counts)
    return extra


def _platform_branch(branches_platforms) -> int:
    """Index of the `platform_dependent` branch that lowering for the default backend keeps."""
    platform = jax.default_backend()
    names = {"gpu": ("cuda", "rocm", "gpu")}.get(platform, (platform,))
    for i, platforms in enumerate(branches_platforms):
        if platforms is not None and any(p in names for p in platforms):
            return i
    return next(i for i, platforms in enumerate(branches_platforms) if platforms is None)


def count_flops(fn: Callable, *args: Any) -> FlopCount:
    """FLOPs of `fn(*args)` (args: arrays or jax.ShapeDtypeStruct; nothing is allocated or run)."""
    closed = jax.make_jaxpr(fn)(*args)
    abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed.in_avals]
    return count_flops_traced(closed, jax.jit(jcore.jaxpr_as_fun(closed)).lower(*abstract))


def count_flops_traced(closed, lowered) -> FlopCount:
    """FLOPs from a jaxpr and its lowering, e.g. `t = jax.jit(f).trace(*args)`: `(t.jaxpr, t.lower())`,
    so a benchmark that compiles `lowered` traces and lowers its function once. Nothing is compiled:
    `Lowered.cost_analysis` analyses the unoptimised HLO (only the scan bodies are lowered again)."""
    xla = _xla_flops(lowered)
    counts = {"scans": 0, "while_loops": 0, "cumulative": 0}
    extra = _correction(closed.jaxpr, {}, counts)
    return FlopCount(flops=xla + extra, xla_flops=xla, **counts)
