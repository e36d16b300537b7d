"""orbax checkpoints of the whole TrainState plus the data iterator's state (JSON).

Layout: `DIR/checkpoints/<step>/{state,data}`. Kept: the last `keep_checkpoints` steps plus the one
with the best held-out PSNR (checkpoints saved at evaluations carry {"psnr": ...} as metrics).
Saving is asynchronous (training continues while arrays are written); orbax writes into a temporary
directory and renames it when complete, so a run killed mid-save leaves the previous checkpoints
valid and the partial one ignored.
"""

from __future__ import annotations

import os
import signal
import threading

import jax
import orbax.checkpoint as ocp

CHECKPOINT_DIR = "checkpoints"


def _preservation_policy(keep: int):
    cm = getattr(ocp, "checkpoint_managers", None)
    if cm is None or not hasattr(cm, "AnyPreservationPolicy"):
        return None  # older orbax: keep-last-N only
    return cm.AnyPreservationPolicy([
        cm.LatestN(n=keep),
        cm.BestN(get_metric_fn=lambda m: m["psnr"], reverse=False, n=1,
                 keep_checkpoints_without_metrics=False),
    ])


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
    out = manager.restore(
        int(step),
        args=ocp.args.Composite(state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()),
    )
    return out["state"], out["data"]


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
