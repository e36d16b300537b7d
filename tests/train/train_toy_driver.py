"""Subprocess driver for the trainer tests: runs the toy family with the toy data.

    python tests/train/train_toy_driver.py WORKDIR [KEY=VALUE ...] [--sleep=SECONDS]

Writes WORKDIR/final_params.npz (the parameters at the end) and prints "STEP n" after each step.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import configs  # noqa: E402
from locojax.train.loop import train_and_evaluate  # noqa: E402
from train_toy_setup import final_params_path, toy_config, toy_data, toy_model  # noqa: E402


def main(argv):
    from locojax.train import compile_cache

    compile_cache.enable()  # as every entry point (experiments/cli.py): $LOCOJAX_JAX_CACHE_DIR, ...
    if os.environ.get("TOY_COORDINATOR"):  # multi-process test: one process per "host"
        try:  # cross-process CPU collectives (the default in newer jax, an option in older ones)
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        except (AttributeError, KeyError, ValueError):
            pass
        jax.distributed.initialize(coordinator_address=os.environ["TOY_COORDINATOR"],
                                   num_processes=int(os.environ["TOY_NUM_PROCESSES"]),
                                   process_id=int(os.environ["TOY_PROCESS_ID"]))
    runs = [a for a in argv if a.startswith("--runs=")]
    if runs:  # several runs in one process (shares JAX start-up): --runs=WD1:k=v,k=v;WD2:...
        argv = [a for a in argv if not a.startswith("--runs=")]
        for spec in runs[0].split("=", 1)[1].split(";"):
            wd, _, kv = spec.partition(":")
            run_one([wd] + [x for x in kv.split(",") if x] + argv)
        return
    run_one(argv)


def run_one(argv):
    workdir, rest = argv[0], argv[1:]
    sleep = 0.0
    overrides = []
    for a in rest:
        if a.startswith("--sleep="):
            sleep = float(a.split("=", 1)[1])
        else:
            overrides.append(a)
    config = toy_config()
    configs.apply_overrides(config, overrides)

    def hook(step, state, metrics):
        print(f"STEP {step}", flush=True)
        if sleep:
            time.sleep(sleep)

    out = train_and_evaluate(config, workdir, model=toy_model(config), data=toy_data(), hooks=[hook])
    flat = {jax.tree_util.keystr(k): np.asarray(v)
            for k, v in jax.tree_util.tree_leaves_with_path(out["state"].params)}
    if jax.process_index() == 0:
        np.savez(final_params_path(workdir, out["step"]), **flat)
    print("DONE", out["step"], out["stopped"], flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
