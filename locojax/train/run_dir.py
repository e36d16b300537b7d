"""The workdir's record of a run: `config.json` (the resolved config; a rerun must match it) and
`run.json` (config, sizes, devices, versions)."""

from __future__ import annotations

import json
import os
import platform
import sys

import jax
import ml_collections

from locojax.render.config_keys import upgrade_render_section

CONFIG_FILE = "config.json"
RUN_FILE = "run.json"

# Keys a rerun may change when it resumes a workdir (the change is logged and config.json updated):
# when and where things happen (length, cadences, paths, prefetching, progress display) and what the
# evaluation measures -- never what a training step computes. Extending `total_steps` does change the
# learning-rate schedule from the resume point on (it decays over the new length). A key ending in
# ".*" covers a whole section.
RESUME_MAY_CHANGE = (
    "total_steps", "log_every", "eval_every", "checkpoint_every", "keep_checkpoints", "progress_bar",
    "max_consecutive_nonfinite", "data.data_dir", "data.prefetch", "data.num_threads", "data.build_workers",
    "data.eval_protocol", "data.eval_num_scenes", "data.eval_batch_size", "eval.*",
)
# Keys `evaluate` may set differently from the run's config.json: the above (evaluation keys included).
EVAL_MAY_CHANGE = RESUME_MAY_CHANGE


class ConfigMismatchError(ValueError):
    pass


def config_to_dict(config) -> dict:
    """JSON-ready dict (tuples -> lists) of a ConfigDict."""
    d = config.to_dict() if isinstance(config, ml_collections.ConfigDict) else dict(config)
    return json.loads(json.dumps(d, default=lambda o: list(o) if isinstance(o, tuple) else str(o)))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _matches(key: str, patterns) -> bool:
    return any(key == p or (p.endswith(".*") and key.startswith(p[:-1])) for p in patterns)


def _current_keys(d: dict) -> dict:
    """`d` with a `render` section saved before the rasteriser keys were named (`render.capacities`)
    in today's form, so that such a run directory resumes and evaluates with today's presets."""
    return {**d, "render": upgrade_render_section(d["render"])} if isinstance(d.get("render"), dict) else d


def config_changes(saved: dict, now: dict) -> list[tuple[str, object, object]]:
    """[(dotted key, value in the workdir, value now)] for every key that differs."""
    fa, fb = _flatten(_current_keys(saved)), _flatten(_current_keys(now))
    return [(k, fa.get(k, "<absent>"), fb.get(k, "<absent>")) for k in sorted(set(fa) | set(fb))
            if fa.get(k, "<absent>") != fb.get(k, "<absent>")]


def _describe(changes) -> str:
    return ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changes)


def load_saved_config(workdir: str) -> ml_collections.ConfigDict | None:
    path = os.path.join(workdir, CONFIG_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return ml_collections.ConfigDict(json.load(f))


def _saved_dict(workdir: str) -> dict | None:
    path = os.path.join(workdir, CONFIG_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def check_config(config, workdir: str, may_change=RESUME_MAY_CHANGE, *, what: str = "a resume") -> list:
    """The allowed changes [(key, saved, now)] of `config` against the workdir's config.json ([] when
    there is none). A change of any other key raises ConfigMismatchError: one line naming the keys."""
    saved = _saved_dict(workdir)
    if saved is None:
        return []
    changes = config_changes(saved, config_to_dict(config))
    refused = [c for c in changes if not _matches(c[0], may_change)]
    if refused:
        raise ConfigMismatchError(
            f"{os.path.join(workdir, CONFIG_FILE)} differs in keys {what} cannot change: {_describe(refused)}"
            f" (model, optimizer and data keys are fixed for a run; use a new --workdir, or the run's values)")
    return changes


def save_config(config, workdir: str) -> None:
    """Write `config` as the workdir's config.json (atomically)."""
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, CONFIG_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(config_to_dict(config), f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def describe_changes(changes) -> str:
    return _describe(changes)


def check_or_save_config(config, workdir: str, write: bool) -> bool:
    """A workdir with a config.json must hold exactly `config`; a fresh one gets it (when `write`).
    Returns True when the workdir already held a config."""
    existed = _saved_dict(workdir) is not None
    check_config(config, workdir, may_change=(), what="a rerun")
    if not existed and write:
        save_config(config, workdir)
    return existed


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "flax", "optax", "orbax.checkpoint", "numpy", "locojax"):
        try:
            mod = __import__(name, fromlist=["__version__"])
            out[name] = getattr(mod, "__version__", "?")
        except ImportError:
            pass
    return out


def write_run_json(workdir: str, config, *, num_params: int, num_gaussians: int, num_frozen_params: int = 0,
                   extra=None) -> None:
    devices = jax.devices()
    record = dict(
        config=config_to_dict(config),
        num_params=int(num_params),  # trainable
        num_frozen_params=int(num_frozen_params),
        num_gaussians=int(num_gaussians),
        device_count=len(devices),
        local_device_count=jax.local_device_count(),
        process_count=jax.process_count(),
        device_kinds=sorted({d.device_kind for d in devices}),
        platform=devices[0].platform,
        versions=versions(),
        argv=sys.argv,
    )
    record.update(extra or {})
    with open(os.path.join(workdir, RUN_FILE), "w") as f:
        json.dump(record, f, indent=1)
