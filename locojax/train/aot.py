"""Ahead-of-time compilation of the train step from shapes alone (no data, no parameters
allocated): proves a full-size config fits a device, and reports XLA's memory analysis."""

from __future__ import annotations

import time

import jax
import numpy as np

from locojax.train import sharding as shd
from locojax.train.checkpoint import abstract_with_shardings
from locojax.train.run import build_run, placeholder_batch, run_train_step
from locojax.train.state import count_params


def train_step_from_shapes(run):
    """(jitted train step, abstract state, abstract batch) of a built run, both abstract values
    carrying the run's shardings: what `.lower(...)` takes to compile the step from shapes alone."""
    state_spec = abstract_with_shardings(run.abstract_state, run.state_shardings)
    bsh = shd.batch_sharding(run.mesh)
    batch_spec = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=bsh),
                                        run.example_batch)
    step = run_train_step(run)
    return step, state_spec, batch_spec


def lower_train_step(config, model=None):
    """(jax Lowered, info) of one train step of `config` at its global batch size, from shapes alone.

    info: num_params / num_frozen_params (from the abstract state), state_bytes (parameters plus
    optimizer state), lower_seconds, and XLA's HLO cost analysis (flops, bytes accessed) when the
    backend provides it.
    """
    run = build_run(config, placeholder_batch(config), model)
    step, state_spec, batch_spec = train_step_from_shapes(run)
    t0 = time.perf_counter()
    lowered = step.lower(state_spec, batch_spec)
    frozen = set(config.optimizer.frozen_groups)
    params = run.abstract_state.params
    info = dict(
        num_params=count_params(params, run.labels, frozen, False),
        num_frozen_params=count_params(params, run.labels, frozen, True),
        num_gaussians=int(run.model.num_gaussians),
        state_bytes=int(sum(np.prod(x.shape) * x.dtype.itemsize
                            for x in jax.tree_util.tree_leaves(run.abstract_state))),
        lower_seconds=time.perf_counter() - t0,
    )
    try:
        cost = lowered.cost_analysis() or {}
        if isinstance(cost, (list, tuple)):
            cost = cost[0] if cost else {}
        info.update({k.replace(" ", "_"): float(v) for k, v in cost.items() if k in ("flops", "bytes accessed")})
    except Exception:  # cost analysis is best effort and backend dependent
        pass
    return lowered, info


def compile_train_step(config, model=None):
    """(compiled executable, info): `lower_train_step` plus compile_seconds and XLA's memory analysis
    in bytes (argument, output, temp, generated code, alias) where the backend provides it."""
    lowered, info = lower_train_step(config, model)
    t0 = time.perf_counter()
    compiled = lowered.compile()
    info["compile_seconds"] = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    for field in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                  "generated_code_size_in_bytes", "alias_size_in_bytes"):
        if mem is not None and hasattr(mem, field):
            info[field] = int(getattr(mem, field))
    return compiled, info
