"""`train_and_evaluate(config, workdir)`: the whole run, resumable by rerunning it.

Order of events: build model and data, restore the latest checkpoint (or initialise), evaluate on
held-out scenes before the first step, then train; log every `log_every`, evaluate (and checkpoint,
with the PSNR used to keep the best) every `eval_every` and after the last step, checkpoint every
`checkpoint_every`. SIGTERM (to any one process of a multi-process run): every process saves
the same step and returns. Too many consecutive non-finite steps: stop with the last checkpoints
intact (NonFiniteError).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional, Sequence

import jax
import numpy as np

from locojax.train import checkpoint as ckpt
from locojax.train.background_compile import BackgroundCompile
from locojax.train import compile_cache
from locojax.train import sharding as shd
from locojax.train.evaluate import DIAG_PREFIX, Evaluator, format_lpips, summarize, write_results
from locojax.train.import_run import init_params_from
from locojax.train.metrics_log import MetricsLogger, Progress, sample_grid, save_png
from locojax.train.run import DataSource, Run, build_run, default_data_source, eval_config, eval_protocol, \
    peek_batch, run_train_step
from locojax.train.run_dir import CONFIG_FILE, check_config, config_changes, config_to_dict, describe_changes, \
    save_config, write_run_json
from locojax.train.state import count_params, create_state


class NonFiniteError(RuntimeError):
    pass


def run_evaluation(run: Run, evaluator: Evaluator, params, step: int, data: DataSource,
                   logger: MetricsLogger, workdir: str, protocol: str, progress=None) -> dict:
    cfg = eval_config(run.config)
    batches = data.make_eval_iterator(cfg, protocol=protocol, process_index=run.process_index,
                                      process_count=run.process_count)
    t0 = time.time()
    results, samples, _ = evaluator.run(params, step, batches, process_count=run.process_count,
                                        num_samples=int(run.config.eval.num_sample_images))
    summary = summarize(results)
    if run.process_index == 0:
        record = dict(step=int(step), split="test", protocol=protocol, psnr=summary["psnr"],
                      ssim=summary["ssim"], lpips=summary["lpips"], num_scenes=summary["num_scenes"],
                      encoder_ms=summary["encoder_ms"], eval_seconds=time.time() - t0,
                      **{k: v for k, v in summary.items() if k.startswith(DIAG_PREFIX)})
        logger.write(record, prefix="eval")
        write_results(results, os.path.join(workdir, "eval", f"{protocol}_step{int(step):07d}"))
        for key, context, pred, target, depth in samples:
            grid = sample_grid(context, pred, target, depth)
            save_png(os.path.join(workdir, "samples", f"step{int(step):07d}_{_safe(key)}.png"), grid)
            logger.image(f"samples/{_safe(key)}", grid, int(step))
        msg = (f"eval step {int(step)} [{protocol}, {summary['num_scenes']} scenes]: "
               f"PSNR {summary['psnr']:.2f}  SSIM {summary['ssim']:.4f}  "
               f"LPIPS {format_lpips(summary['lpips'], 0)}")
        (progress.message if progress else print)(msg)
    return summary


def _report_first_step(metrics, t_setup: float, counts0: dict, is_main: bool, progress, logger, step: int) -> None:
    """Time to the first step's result (the step-0 evaluation and the compile included), JAX's trace /
    lower / compile seconds so far and what the persistent compilation cache served, written to
    metrics.jsonl (split "setup") and printed (locojax/train/compile_cache.py)."""
    jax.block_until_ready(metrics)
    seconds = time.time() - t_setup
    counts = {k: v - counts0[k] for k, v in compile_cache.counts().items()}
    if is_main:
        logger.write(dict(step=step, split="setup", first_step_seconds=seconds, compile_cache_hits=counts["hits"],
                          compile_cache_writes=counts["writes"], trace_seconds=counts["trace_seconds"],
                          lower_seconds=counts["lower_seconds"], compile_seconds=counts["compile_seconds"]),
                     prefix="setup")
        progress.message(f"first step done {seconds:.1f} s after setup (step-0 evaluation included); so far "
                         f"tracing {counts['trace_seconds']:.1f} s, lowering {counts['lower_seconds']:.1f} s, "
                         f"XLA compile {counts['compile_seconds']:.1f} s; compilation cache "
                         f"{jax.config.jax_compilation_cache_dir or 'off'}: {counts['hits']} executables loaded, "
                         f"{counts['writes']} written")


def _close(iterator) -> None:
    if hasattr(iterator, "close"):
        iterator.close()


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key))[:80]


def _host_scalars(metrics: dict) -> dict:
    out = {}
    for k, v in jax.device_get(metrics).items():
        v = np.asarray(v)
        out[k] = int(v) if np.issubdtype(v.dtype, np.integer) else float(v)
    return out


def _check_config(config, workdir: str):
    """(changes, replaced): a workdir with a checkpoint allows only `run_dir.RESUME_MAY_CHANGE` keys to
    differ (ConfigMismatchError naming the others); one with a config.json but no checkpoint (a run that
    failed during setup) takes the new config whole (replaced=True)."""
    if ckpt.has_checkpoint(workdir):
        return check_config(config, workdir), False
    path = os.path.join(workdir, CONFIG_FILE)
    if not os.path.exists(path):
        return [], False
    import json

    with open(path) as f:
        saved = json.load(f)
    return config_changes(saved, config_to_dict(config)), True


def train_and_evaluate(config, workdir: str, *, model=None, data: Optional[DataSource] = None,
                       hooks: Sequence[Callable] = (), init_from: Optional[str] = None) -> dict:
    """Train (or resume) the run in `workdir`. Returns {"state", "step", "eval", "stopped"}.

    init_from: a run directory (e.g. made by `experiments.import_weights`) whose latest params start
    a fresh run (optimizer state and step start anew); ignored when `workdir` already has a checkpoint.

    model / data default to `build_model(config)` / the data pipelines; `hooks` are called as
    hook(step_done, state, metrics) after every step (device arrays; tests, profiling).
    """
    counts0 = compile_cache.counts()  # this run's share of the process' compilation counters
    workdir = os.path.abspath(workdir)
    data = default_data_source() if data is None else data
    is_main = jax.process_index() == 0
    changes, replaced = _check_config(config, workdir)  # nothing is written before setup succeeds

    train_iter = data.make_train_iterator(config, process_index=jax.process_index(),
                                          process_count=jax.process_count())
    try:
        run = build_run(config, peek_batch(train_iter), model)
        total = int(config.total_steps)
        protocol = eval_protocol(config)
        # An unknown protocol, an unbuilt test split or a wrong --init_from fails here, before anything
        # is written, not at the first evaluation.
        _close(data.make_eval_iterator(eval_config(config), protocol=protocol, process_index=run.process_index,
                                       process_count=run.process_count))
        init_params = None
        if init_from and not ckpt.has_checkpoint(workdir):
            init_params = init_params_from(init_from, run)
        manager = ckpt.make_manager(workdir, int(config.keep_checkpoints))
        restored = ckpt.restore_latest_intact(manager, workdir, run.abstract_state, run.state_shardings)
    except BaseException:
        _close(train_iter)
        raise
    latest = None if restored is None else restored[0]
    if restored is not None and int(latest) >= total:  # a finished run: say so, touch nothing
        if hasattr(train_iter, "close"):
            train_iter.close()
        manager.close()
        if is_main:
            print(f"{workdir} is already at its last step {int(latest)} (total_steps={total}); nothing to "
                  f"train. To train longer: --config.total_steps=N with N > {int(latest)}.", flush=True)
        return {"state": restored[1], "step": int(latest), "eval": None, "stopped": None, "finished": True}
    # From here the train step traces, lowers and compiles (or loads from the persistent cache) on a
    # background thread, beside the state's initialisation and the step-0 evaluation: on a warm rerun
    # these are the three largest executables to load (docs/performance.md, "warm rerun, end to end").
    pending_step = BackgroundCompile(run_train_step(run), ckpt.abstract_with_shardings(run.abstract_state, run.state_shardings),
                                     run.example_batch)
    if restored is not None:
        _, state, data_states = restored
        processes = data_states.get("processes") or []
        if run.process_index < len(processes):  # (a checkpoint made by import_weights has none)
            train_iter.set_state(processes[run.process_index])
        start = int(latest)
    else:
        state = create_state(run.init_fn, jax.random.PRNGKey(int(config.seed)), run.example_batch,
                             run.state_shardings)
        if init_params is not None:
            params, from_step = init_params
            state = state.replace(params=params)
            if is_main:
                print(f"initialised the params from {init_from} (step {from_step})", flush=True)
        start = 0
    frozen = set(config.optimizer.frozen_groups)
    if is_main:
        if changes:
            print((f"{os.path.join(workdir, CONFIG_FILE)} held another config but no checkpoint; replacing it: "
                   if replaced else f"resuming {workdir} at step {start} with changed keys: ")
                  + describe_changes(changes), flush=True)
        save_config(config, workdir)
        write_run_json(workdir, config, num_params=count_params(state.params, run.labels, frozen, False),
                       num_frozen_params=count_params(state.params, run.labels, frozen, True),
                       num_gaussians=run.model.num_gaussians,
                       extra=dict(resumed_from_step=latest, resumed_config=latest is not None,
                                  config_changes=[list(map(str, c)) for c in changes]))

    logger = MetricsLogger(workdir, enabled=is_main)
    progress = Progress(total, start, enabled=bool(config.progress_bar) and is_main)
    evaluator = Evaluator(run.model, run.render, config, run.mesh, run.state_shardings.params)

    def data_state():
        return {"processes": shd.allgather_json(train_iter.get_state(), run.process_count)}

    def save(step, metrics=None):
        ckpt.save(manager, step, state, data_state(), metrics)

    last_eval = None
    t_setup = time.time()
    if start == 0:
        last_eval = run_evaluation(run, evaluator, state.params, 0, data, logger, workdir, protocol, progress)
    step_fn = pending_step.result()
    max_bad = int(config.max_consecutive_nonfinite)
    eval_every, log_every = int(config.eval_every), int(config.log_every)
    ckpt_every = int(config.checkpoint_every)
    stopped = None
    t_last, steps_since = time.time(), 0
    try:
        with ckpt.StopSignal() as stop:
            for step in range(start, total):
                batch = shd.global_batch(next(train_iter), run.mesh)
                state, metrics = step_fn(state, batch)
                done = step + 1
                if step == start:
                    _report_first_step(metrics, t_setup, counts0, is_main, progress, logger, done)
                steps_since += 1
                progress.update(done)
                for hook in hooks:
                    hook(done, state, metrics)
                bad = int(jax.device_get(metrics["consecutive_nonfinite"]))
                if bad >= max_bad:
                    manager.wait_until_finished()
                    good = manager.latest_step()
                    where = (f"step {good} ({os.path.join(workdir, ckpt.CHECKPOINT_DIR, str(good))})"
                             if good is not None else "none (no checkpoint was saved yet)")
                    raise NonFiniteError(
                        f"Stopped at step {done}: {bad} consecutive steps had a non-finite loss or "
                        f"gradient (each was skipped; limit config.max_consecutive_nonfinite={max_bad}). "
                        f"The last good checkpoint is {where}; it was not overwritten.")
                if done % log_every == 0 or done == total:
                    now = time.time()
                    record = _host_scalars(metrics)
                    record.update(step=done, steps_per_sec=steps_since / max(now - t_last, 1e-9))
                    t_last, steps_since = now, 0
                    if is_main:
                        logger.write(record)
                        progress.log(record)
                if done % eval_every == 0 or done == total:
                    last_eval = run_evaluation(run, evaluator, state.params, done, data, logger,
                                               workdir, protocol, progress)
                    save(done, {"psnr": float(last_eval["psnr"])})
                    t_last, steps_since = time.time(), 0  # steps/s measures training only
                elif done % ckpt_every == 0:
                    save(done)
                # The stop decision must be the same on every process: SIGTERM usually reaches one
                # host only, and a process that leaves the loop alone would leave the others blocked
                # in the next step's collectives (and save a checkpoint nobody else writes). So with
                # several processes the local flags are OR-ed by a tiny allgather every step (the
                # loop syncs the host every step anyway, for the non-finite counter); all processes
                # stop after the same step and take part in the same (collective) orbax save.
                # Not JAX's preemption service (multihost_utils.reached_preemption_sync_point, which
                # orbax's CheckpointManager.reached_preemption wraps): it works on CPU + gloo, but it
                # relies on its own C++ SIGTERM handler, which StopSignal's handler replaces, it does
                # not exist in single-process runs, and it stops only at a later "max step + 1"
                # agreed asynchronously (4 steps of 0.2 s after the signal in a 2-process probe),
                # not at the first step every process can see.
                if shd.any_process(stop.requested, run.process_count):
                    if done % ckpt_every and done % eval_every and done != total:
                        save(done)
                    stopped = f"SIGTERM: checkpoint saved at step {done}"
                    progress.message(stopped)
                    break
    finally:
        if hasattr(train_iter, "close"):
            train_iter.close()
        manager.wait_until_finished()
        progress.close()
        logger.close()
    return {"state": state, "step": int(jax.device_get(state.step)), "eval": last_eval, "stopped": stopped}
