"""python -m experiments.benchmark train_step [--config=globalsplat_16k] [--config.KEY=VALUE ...]
                                            [--lower_only] [--steps=N] [--json=PATH]

Compiles one training step of a named config ahead of time from shapes alone and prints XLA's
memory analysis (argument / output / temp bytes), then, unless --lower_only, times N steps on
placeholder data (identity cameras, zero images: a speed figure, not a training run).
"""

from __future__ import annotations

import argparse
import json
import time

import configs


def main(argv) -> int:
    overrides, rest = configs.parse_overrides(list(argv))
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark train_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="globalsplat_16k")
    parser.add_argument("--lower_only", action="store_true", help="trace and lower only (no compile)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(rest)
    config = configs.get_config(args.config)
    configs.apply_overrides(config, overrides)

    import jax

    from locojax.train import aot

    if args.lower_only:
        _, info = aot.lower_train_step(config)
    else:
        compiled, info = aot.compile_train_step(config)
        if args.steps > 0:
            from locojax.train.loop import build_run
            from locojax.train import sharding as shd
            from locojax.train.state import create_state

            run = build_run(config, aot.placeholder_batch(config))
            state = create_state(run.init_fn, jax.random.PRNGKey(0), run.example_batch, run.state_shardings)
            batch = shd.global_batch(aot.placeholder_batch(config), run.mesh)
            state, m = compiled(state, batch)
            jax.block_until_ready(m)
            t0 = time.perf_counter()
            for _ in range(args.steps):
                state, m = compiled(state, batch)
            jax.block_until_ready(m)
            info["seconds_per_step"] = (time.perf_counter() - t0) / args.steps
    info.update(config=args.config, devices=[d.device_kind for d in jax.devices()],
                global_batch_size=int(config.batch_size))
    for k, v in info.items():
        print(f"{k:>28s}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)
    return 0
