"""Evaluate a trained checkpoint (what `python -m experiments.evaluate` runs): restore step N (or the
latest), run a protocol, write per-scene CSV/JSON, print the summary table, export .ply files."""

from __future__ import annotations

import os
from typing import Iterable, Optional

import jax

from locojax.train import checkpoint as ckpt
from locojax.train.evaluate import Evaluator, format_table, summarize, write_results
from locojax.train.run import DataSource, build_run, default_data_source, eval_config, eval_protocol, peek_batch
from locojax.train.run_dir import EVAL_MAY_CHANGE, check_config


def evaluate_checkpoint(config, workdir: str, *, step: Optional[int] = None, protocol: Optional[str] = None,
                        export_ply: Iterable[str] | int | None = None, model=None,
                        data: Optional[DataSource] = None, verbose: bool = True) -> dict:
    """Returns {"step", "protocol", "results", "summary", "csv", "json", "ply"}.

    export_ply: scene keys to export, or an int k for the first k scenes, or None.
    `config` may differ from the run's config.json only in `run_dir.EVAL_MAY_CHANGE` keys (e.g.
    eval.protocol, eval.num_scenes).
    """
    workdir = os.path.abspath(workdir)
    if not os.path.isdir(os.path.join(workdir, ckpt.CHECKPOINT_DIR)):
        raise FileNotFoundError(f"--workdir={workdir}: no checkpoints/ (train first)")
    check_config(config, workdir, EVAL_MAY_CHANGE, what="an evaluation")  # (eval keys may differ)
    data = default_data_source() if data is None else data
    pi, pc = jax.process_index(), jax.process_count()
    run = build_run(config, peek_batch(data.make_train_iterator(config, process_index=pi, process_count=pc)),
                    model)
    manager = ckpt.make_manager(workdir, int(config.keep_checkpoints))
    steps = list(manager.all_steps())
    if not steps:
        raise FileNotFoundError(f"--workdir={workdir}: no complete checkpoint")
    step = manager.latest_step() if step is None else int(step)
    if step not in steps:
        raise ValueError(f"--step={step}: no checkpoint at that step in {workdir}; available: {sorted(steps)}")
    state, _ = ckpt.restore_checked(manager, step, run.abstract_state, run.state_shardings)
    protocol = eval_protocol(config, protocol)
    evaluator = Evaluator(run.model, run.render, config, run.mesh, run.state_shardings.params)
    batches = list(data.make_eval_iterator(eval_config(config), protocol=protocol, process_index=pi,
                                           process_count=pc))
    if isinstance(export_ply, int):
        keys = [k for _, ks in batches for k in ks if k]
        export = keys[:export_ply]
    else:
        export = list(export_ply or [])
    results, _, exported = evaluator.run(state.params, step, batches, process_count=pc, export_scenes=export)
    missing = set(export) - set(exported)
    if missing:
        raise ValueError(f"--export_ply: scenes {sorted(missing)} are not in protocol {protocol!r}")
    out = dict(step=step, protocol=protocol, results=results, summary=summarize(results), ply=[])
    if pi == 0:
        stem = os.path.join(workdir, "eval", f"{protocol}_step{step:07d}")
        out["csv"], out["json"] = write_results(results, stem)
        if exported:
            from locojax.io.ply import write_ply

            for key, g in exported.items():
                path = os.path.join(workdir, "ply", f"{protocol}_step{step:07d}", f"{key}.ply")
                write_ply(path, g)
                out["ply"].append(path)
        if verbose:
            print(format_table(results, title=f"{protocol} @ step {step} ({workdir})"))
            print(f"per-scene results: {out['csv']}, {out['json']}")
            for p in out["ply"]:
                print(f"wrote {p}")
    manager.close()
    return out
