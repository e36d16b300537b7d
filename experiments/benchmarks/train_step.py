"""python -m experiments.benchmark train_step [--config=globalsplat_tiny] [--config.KEY=VALUE ...]
                                            [--lower_only] [--steps=N] [--json=PATH]

Without --config it runs globalsplat_tiny (a CPU-sized step); name a full preset (e.g.
--config=globalsplat_16k, --config=locosplat_6v) for the paper-size figures, which need an accelerator.

Compiles one training step of a named config ahead of time from shapes alone and prints XLA's
memory analysis (argument / output / temp bytes), then, unless --lower_only, times N steps on
placeholder data (identity cameras, zero images: a speed figure, not a training run; one untimed
warm-up step runs first). `peak_rss_bytes` is the process' peak resident memory, compile included.
"""

from __future__ import annotations

import json
import time

from absl import flags

from experiments import cli
from experiments.benchmarks.process_memory import peak_rss_bytes, release_freed_memory, resident_bytes


def _gib(n):
    return "?" if n is None else f"{n / 2**30:.2f}"


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_boolean("lower_only", False, "trace and lower only (no compile)", flag_values=fv)
    flags.DEFINE_integer("steps", 3, "timed steps", flag_values=fv)
    flags.DEFINE_string("json", None, "write the figures to this .json", flag_values=fv)


DEFAULT_CONFIG = "globalsplat_tiny"  # the 16k preset's step does not fit a 2-core CPU: name it explicitly


def _default_config(known) -> str:
    return DEFAULT_CONFIG


def main(argv) -> int:
    args = cli.parse(argv, _define_flags, doc=__doc__, config_default=_default_config)
    if isinstance(args, int):
        return args
    config = args.config
    config_name = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), DEFAULT_CONFIG)

    import jax

    from locojax.train import aot

    if args.lower_only:
        _, info = aot.lower_train_step(config)
    else:
        compiled, info = aot.compile_train_step(config)
        if "temp_size_in_bytes" in info:  # before running anything: is there room for the step?
            print(f"memory analysis: arguments {info['argument_size_in_bytes'] / 2**30:.2f} GiB + temp "
                  f"{info['temp_size_in_bytes'] / 2**30:.2f} GiB (compile {info['compile_seconds']:.0f} s)",
                  flush=True)
        if args.steps > 0:
            info["rss_after_compile_bytes"] = release_freed_memory()
            print(f"resident memory after compile: {_gib(info['rss_after_compile_bytes'])} GiB", flush=True)
            from locojax.train.run import build_run, placeholder_batch
            from locojax.train import sharding as shd
            from locojax.train.state import create_state

            run = build_run(config, placeholder_batch(config))
            state = create_state(run.init_fn, jax.random.PRNGKey(0), run.example_batch, run.state_shardings)
            batch = shd.global_batch(placeholder_batch(config), run.mesh)
            print(f"resident memory with state and batch: {_gib(resident_bytes())} GiB", flush=True)
            t0 = time.perf_counter()
            state, m = compiled(state, batch)
            jax.block_until_ready(m)
            info["first_step_seconds"] = time.perf_counter() - t0
            print(f"first (untimed) step: {info['first_step_seconds']:.1f} s", flush=True)
            t0 = time.perf_counter()
            for _ in range(args.steps):
                state, m = compiled(state, batch)
            jax.block_until_ready(m)
            info["seconds_per_step"] = (time.perf_counter() - t0) / args.steps
    info.update(config=config_name, devices=[d.device_kind for d in jax.devices()],
                global_batch_size=int(config.batch_size), peak_rss_bytes=peak_rss_bytes())
    for k, v in info.items():
        print(f"{k:>28s}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)
    return 0
