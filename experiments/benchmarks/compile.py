"""python -m experiments.benchmark compile [--config=NAME ...] [--override=KEY=VALUE ...] [--out=FILE.json]
                                         [--no_eval] [--no_warm] [--update_only]

Time to a compiled step, per preset: the train step's trace, lower (StableHLO) and XLA compile
seconds, and the evaluation's (predict, render + PSNR/SSIM, LPIPS when `eval.lpips`), each twice:
cold (a fresh, empty persistent compilation cache) and warm (the same cache, after
`jax.clear_caches()`: what a rerun, resume, `evaluate` or `render` pays; tracing and lowering are not
cached across processes, only XLA's compile). Everything is compiled from shapes alone (no data, no
parameters allocated). The 1-minute load average is recorded next to each preset (the dev box is
shared), with the cache entries and hits.

`--update_only` times the optimizer half of the train step alone (`locojax.train.step.apply_gradients`:
global norm, optax update, apply, non-finite guard, on gradients shaped like the params): a cheap
probe of the part of the compile that scales with the number of parameter leaves. Every record
also counts the compiled executables' XLA kernels (`kernels`: fusions and library calls), which
is what XLA:CPU's LLVM back end pays for one by one.

Without --config: every `*_tiny` preset. Full-size presets (e.g. --config=globalsplat_16k
--override=batch_size=1) need several GB to compile on CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

TINY = ("locosplat_tiny", "globalsplat_tiny", "locusgs_tiny", "tokengs_tiny")


def _timed_stages(jitted, *args) -> dict:
    """trace / lower / compile wall seconds of `jitted` on abstract `args`, and the process' CPU
    seconds of each (`*_cpu`: all threads; less sensitive than wall time to other jobs on the box)."""
    t0, c0 = time.perf_counter(), time.process_time()
    traced = jitted.trace(*args)
    t1, c1 = time.perf_counter(), time.process_time()
    lowered = traced.lower()
    t2, c2 = time.perf_counter(), time.process_time()
    compiled = lowered.compile()
    t3, c3 = time.perf_counter(), time.process_time()
    return dict(trace=t1 - t0, lower=t2 - t1, compile=t3 - t2, trace_cpu=c1 - c0, lower_cpu=c2 - c1,
                compile_cpu=c3 - c2, kernels=num_kernels(compiled), _compiled=compiled)


def num_kernels(compiled) -> int:
    """Fusions and custom calls (library convolutions, matmuls) in a compiled executable's optimized
    HLO, loop bodies and conditional branches included; -1 when the backend gives no text."""
    try:
        text = compiled.as_text()
    except Exception:  # the text is best effort and backend dependent
        return -1
    return text.count(" fusion(") + text.count(" custom-call(")


STAGES = ("trace", "lower", "compile", "trace_cpu", "lower_cpu", "compile_cpu", "kernels")


def _sum(parts: dict) -> dict:
    return {k: sum(p[k] for p in parts.values()) for k in STAGES}


def measure(config, with_eval: bool = True, update_only: bool = False) -> dict:
    """{"train": {trace, lower, compile, *_cpu, kernels}, "eval": {... summed, "parts": {name: {...}}}}
    in seconds; `update_only`: {"update": {...}} for the optimizer half of the step alone."""
    import jax
    import jax.numpy as jnp

    from locojax.train import aot
    from locojax.train.evaluate import Evaluator
    from locojax.train.run import build_run, placeholder_batch
    from locojax.train.step import apply_gradients

    run = build_run(config, placeholder_batch(config))
    step, state_spec, batch_spec = aot.train_step_from_shapes(run)
    if update_only:
        update = jax.jit(lambda state, grads: apply_gradients(run.tx, state, jnp.float32(0.0), grads),
                         donate_argnums=(0,))
        out = {"update": _timed_stages(update, state_spec, state_spec.params)}
        out["update"].pop("_compiled")
        return out
    out = {"train": _timed_stages(step, state_spec, batch_spec)}
    out["train"].pop("_compiled")
    if with_eval:
        ev = Evaluator(run.model, run.render, config, run.mesh, run.state_shardings.params)
        step_spec = jax.ShapeDtypeStruct((), jnp.int32)
        parts = {"predict": _timed_stages(ev._predict, state_spec.params, batch_spec.context, step_spec)}
        gaussians, _, _ = jax.eval_shape(ev._predict, state_spec.params, batch_spec.context, step_spec)
        parts["render_metrics"] = _timed_stages(ev._render_metrics, gaussians, batch_spec.target)
        rgb = jax.eval_shape(ev._render_metrics, gaussians, batch_spec.target)[0]
        if ev.use_lpips:
            lp = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), ev._lpips_params())
            parts["lpips"] = _timed_stages(ev._lpips, lp, rgb, jax.ShapeDtypeStruct(rgb.shape, rgb.dtype))
        for p in parts.values():
            p.pop("_compiled")
        out["eval"] = dict(_sum(parts), parts=parts)
    return out


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def bench(name: str, overrides, with_eval: bool, warm: bool, update_only: bool = False) -> dict:
    import jax

    import configs
    from locojax.train import compile_cache

    config = configs.get_config(name)
    configs.apply_overrides(config, list(overrides))
    cache_dir = tempfile.mkdtemp(prefix="locojax-compile-bench-")
    try:
        compile_cache.enable(cache_dir)
        jax.clear_caches()
        rec = dict(config=name, overrides=list(overrides), load_before=_load())
        c0 = compile_cache.counts()
        rec["cold"] = measure(config, with_eval, update_only)
        rec["load_cold"] = _load()
        rec["cache_entries"] = compile_cache.num_entries(cache_dir)
        rec["cache_entry_bytes"] = {f: os.path.getsize(os.path.join(cache_dir, f))
                                    for f in sorted(os.listdir(cache_dir)) if f.endswith("-cache")}
        if warm:
            jax.clear_caches()
            c1 = compile_cache.counts()
            rec["warm"] = measure(config, with_eval, update_only)
            rec["load_warm"] = _load()
            rec["warm_cache_hits"] = compile_cache.counts()["hits"] - c1["hits"]
        rec["cold_cache_writes"] = compile_cache.counts()["writes"] - c0["writes"]
        return rec
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        jax.clear_caches()


def format_row(rec: dict) -> str:
    def cell(phase, part):
        m = rec.get(phase, {}).get(part)
        return ("-" if m is None else f"{m['trace']:.1f} / {m['lower']:.1f} / {m['compile']:.1f} "
                f"({m['compile_cpu']:.0f}; {m['kernels']} kernels)")

    first = "update" if "update" in rec.get("cold", {}) else "train"
    return (f"| {rec['config']} | {cell('cold', first)} | {cell('cold', 'eval')} | {cell('warm', 'train')} | "
            f"{cell('warm', 'eval')} | {rec.get('cache_entries', '-')} / {rec.get('warm_cache_hits', '-')} | "
            f"{rec['load_before']:.1f} / {rec['load_cold']:.1f} / {rec.get('load_warm', float('nan')):.1f} |")


HEADER = ("| config | train (or update) cold: trace / lower / compile s (compile CPU s; kernels) | eval cold | train warm | eval warm | "
          "cache entries / warm hits | load avg (1 min): start / cold / warm |\n|---|---|---|---|---|---|---|")


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark compile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", help="a preset name (repeatable); default: every *_tiny")
    p.add_argument("--override", action="append", default=[], help="KEY=VALUE applied to every config")
    p.add_argument("--out", help="write the records to this .json")
    p.add_argument("--no_eval", action="store_true", help="the train step only")
    p.add_argument("--no_warm", action="store_true", help="cold only")
    p.add_argument("--update_only", action="store_true",
                   help="the optimizer half of the train step alone (apply_gradients), no eval")
    args = p.parse_args(argv)
    import configs

    names = args.config or list(TINY)
    known = set(configs.config_names())
    for n in names:
        if n not in known:
            print(f"error: unknown config {n!r} (--config=help of experiments.train lists them)", file=sys.stderr)
            return 2
    import jax

    records = []
    print(HEADER, flush=True)
    for name in names:
        rec = bench(name, args.override, not args.no_eval, not args.no_warm, args.update_only)
        rec.update(backend=jax.default_backend(), cpu_count=os.cpu_count(), jax=jax.__version__,
                   xla_flags=os.environ.get("XLA_FLAGS", ""), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        records.append(rec)
        print(format_row(rec), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(records, f, indent=1)
    return 0
