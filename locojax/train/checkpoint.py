"""orbax checkpoints of the whole TrainState plus the data iterator's state (JSON).

Layout: `DIR/checkpoints/<step>/{state,data}`. Kept: the last `keep_checkpoints` steps plus the one
with the best held-out PSNR (checkpoints saved at evaluations carry {"psnr": ...} as metrics).
Saving is asynchronous (training continues while arrays are written); orbax writes into a temporary
directory and renames it when complete, so a run killed mid-save leaves the previous checkpoints
valid and the partial one ignored.

A checkpoint that exists but cannot be read (a truncated or altered file) raises
`CorruptCheckpointError`, one line naming the step and the earlier checkpoints. Every restore runs
under `draining_loops.draining_event_loops()`: orbax stops at the first failed array read, and the
reads still in flight are cancelled and awaited with their errors consumed before that error is
raised, so they cannot print thousands of lines later (issue 27). Nothing is filtered from logging.
`restore_latest_intact` (resume) moves a corrupt checkpoint aside to `DIR/checkpoints_corrupt/<step>`
(never deletes it) and falls back to the previous one, saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading

import jax
import numpy as np
import orbax.checkpoint as ocp

from locojax.train.draining_loops import draining_event_loops

CHECKPOINT_DIR = "checkpoints"
CORRUPT_DIR = "checkpoints_corrupt"


class CorruptCheckpointError(RuntimeError):
    """A checkpoint step that exists but cannot be restored."""

    def __init__(self, message: str, step: int, path: str):
        super().__init__(message)
        self.step, self.path = step, path


def _preservation_policy(keep: int):
    cm = getattr(ocp, "checkpoint_managers", None)
    if cm is None or not hasattr(cm, "AnyPreservationPolicy"):
        return None  # older orbax: keep-last-N only
    return cm.AnyPreservationPolicy([
        cm.LatestN(n=keep),
        cm.BestN(get_metric_fn=lambda m: m["psnr"], reverse=False, n=1,
                 keep_checkpoints_without_metrics=False),
    ])


def has_checkpoint(workdir: str) -> bool:
    """Whether `workdir/checkpoints/` holds a step directory (without opening a manager, which would
    create the directory)."""
    path = os.path.join(workdir, CHECKPOINT_DIR)
    return os.path.isdir(path) and any(name.isdigit() for name in os.listdir(path))


def make_manager(workdir: str, keep: int, async_save: bool = True) -> ocp.CheckpointManager:
    policy = _preservation_policy(keep)
    kwargs = dict(create=True, enable_async_checkpointing=async_save)
    if policy is not None:
        kwargs["preservation_policy"] = policy
    else:
        kwargs["max_to_keep"] = keep
    return ocp.CheckpointManager(
        os.path.join(os.path.abspath(workdir), CHECKPOINT_DIR),
        options=ocp.CheckpointManagerOptions(**kwargs),
        item_names=("state", "data"),
    )


def save(manager, step: int, state, data_state: dict, metrics: dict | None = None) -> None:
    manager.save(
        int(step),
        args=ocp.args.Composite(state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state)),
        metrics=metrics,
        force=True,
    )


def abstract_with_shardings(abstract_state, shardings):
    return jax.tree_util.tree_map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract_state, shardings
    )


def restore(manager, step: int, abstract_state, shardings):
    """(TrainState in `shardings`, data-iterator state dict) of checkpoint `step`."""
    target = abstract_with_shardings(abstract_state, shardings)
    with draining_event_loops():
        out = manager.restore(
            int(step),
            args=ocp.args.Composite(state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()),
        )
    return out["state"], out["data"]


def _first_line(e: BaseException, limit: int = 240) -> str:
    """First line of the innermost cause (orbax wraps tensorstore's precise message)."""
    seen = {id(e)}
    while (e.__cause__ or e.__context__) is not None and id(e.__cause__ or e.__context__) not in seen:
        e = e.__cause__ or e.__context__
        seen.add(id(e))
    text = (str(e).strip().splitlines() or [""])[0]
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def step_path(manager, step: int) -> str:
    return os.path.join(str(manager.directory), str(int(step)))


def restore_checked(manager, step: int, abstract_state, shardings, offer_earlier: bool = True):
    """`restore`, raising CorruptCheckpointError (one line: step, path, cause and, with
    `offer_earlier`, the earlier steps to try) when checkpoint `step` cannot be read."""
    try:
        return restore(manager, step, abstract_state, shardings)
    except Exception as e:  # noqa: BLE001 - any failure to read is reported the same way
        earlier = sorted((s for s in manager.all_steps() if s < step), reverse=True)
        offer = (f"; earlier checkpoints: {', '.join(map(str, earlier))} (e.g. --step={earlier[0]})"
                 if earlier else "; no earlier checkpoint")
        raise CorruptCheckpointError(
            f"checkpoint step {step} ({step_path(manager, step)}) cannot be read: {_first_line(e)}"
            f"{offer if offer_earlier else ''}", step, step_path(manager, step)) from e


def move_aside(manager, workdir: str, step: int) -> str:
    """Move checkpoint `step` to `workdir/checkpoints_corrupt/<step>` (a new name if taken) and
    refresh the manager's step list. Returns the new path."""
    dest_root = os.path.join(os.path.abspath(workdir), CORRUPT_DIR)
    os.makedirs(dest_root, exist_ok=True)
    dest, n = os.path.join(dest_root, str(int(step))), 1
    while os.path.exists(dest):
        dest, n = os.path.join(dest_root, f"{int(step)}.{n}"), n + 1
    shutil.move(step_path(manager, step), dest)
    manager.reload()
    return dest


def restore_latest_intact(manager, workdir: str, abstract_state, shardings, log=print):
    """(step, state, data_state) of the newest checkpoint that restores, or None when there is none.

    Newer checkpoints that fail are moved aside (see `move_aside`) with a one-line message each, but
    only once an older one has restored: when none restores the cause is not a damaged file (e.g. the
    model's structure changed), so nothing is moved and the latest failure is raised. Only process 0
    moves files (all processes see the same failure on a shared filesystem)."""
    failed = []
    for step in sorted(manager.all_steps(), reverse=True):
        try:
            state, data = restore_checked(manager, step, abstract_state, shardings, offer_earlier=False)
        except CorruptCheckpointError as e:
            failed.append(e)
            continue
        for e in failed:
            if jax.process_index() == 0:
                dest = move_aside(manager, workdir, e.step)
            else:
                dest = os.path.join(os.path.abspath(workdir), CORRUPT_DIR, str(e.step))
                manager.reload()
            log(f"warning: {e}. Moved it to {dest}; resuming from the previous checkpoint.")
        if failed:
            log(f"resumed from checkpoint step {step}")
        return int(step), state, data
    if failed:
        e = failed[0]
        raise CorruptCheckpointError(
            f"{e} (and none of the {len(failed)} checkpoints in {manager.directory} restores, so none "
            "was moved: does this code/config still build the model that wrote them?)", e.step, e.path)
    return None


def restore_raw_params(manager, step: int) -> dict:
    """The `params` sub-tree of checkpoint `step` as host numpy arrays, without a target structure
    (another run's checkpoint: its optimizer state may differ from ours)."""
    try:
        with draining_event_loops():
            path = os.path.join(step_path(manager, step), "state")
            checkpointer = ocp.PyTreeCheckpointer()
            meta = checkpointer.metadata(path)
            tree = getattr(meta, "item_metadata", None) or getattr(meta, "tree", None) or meta
            tree = getattr(tree, "tree", tree)
            restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
            state = checkpointer.restore(path, args=ocp.args.PyTreeRestore(restore_args=restore_args))
    except Exception as e:  # noqa: BLE001
        raise CorruptCheckpointError(f"checkpoint step {step} ({step_path(manager, step)}) cannot be "
                                     f"read: {_first_line(e)}", step, step_path(manager, step)) from e
    return state["params"]


def restore_params(workdir: str, step: int | None = None, flag: str | None = None) -> tuple[dict, int]:
    """The `params` of checkpoint `step` (default: the latest) of the run in `workdir`, read without a
    target structure (`restore_raw_params`: another run's optimizer state may differ from ours).

    Args:
      workdir: a run directory (holding `checkpoints/`); nothing is written there.
      step: which checkpoint; None for the latest complete one.
      flag: the command-line flag that named `workdir` (e.g. "--init_from"), so that errors say
        "--init_from=DIR: ..."; None names the directory alone.
    Returns:
      (params as a nested dict of host numpy arrays, the step read).
    Raises FileNotFoundError when there is no `checkpoints/` or no complete checkpoint in it, and
    CorruptCheckpointError when the step cannot be read.
    """
    workdir = os.path.abspath(workdir)
    name = f"{flag}={workdir}" if flag else workdir
    if not os.path.isdir(os.path.join(workdir, CHECKPOINT_DIR)):
        raise FileNotFoundError(f"{name}: no checkpoints/ there")
    manager = make_manager(workdir, 1000, async_save=False)
    try:
        steps = sorted(manager.all_steps())
        if not steps:
            raise FileNotFoundError(f"{name}: no complete checkpoint")
        step = steps[-1] if step is None else int(step)
        return restore_raw_params(manager, step), step
    finally:
        manager.close()


class StopSignal:
    """Turns SIGTERM (preemption, `kill`) into a flag the loop polls between steps, so that it can
    save a checkpoint and exit cleanly instead of dying mid-step. The flag is per process; in a
    multi-process run the loop OR-s it over processes every step (`sharding.any_process`)."""

    def __init__(self, signals=(signal.SIGTERM,)):
        self._event = threading.Event()
        self._previous = {}
        self._signals = signals

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in self._signals:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame):
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def __exit__(self, *exc):
        for s, h in self._previous.items():
            signal.signal(s, h)
        return False
