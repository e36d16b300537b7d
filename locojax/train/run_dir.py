"""The workdir's record of a run: `config.json` (the resolved config; a rerun must match it) and
`run.json` (config, sizes, devices, versions)."""

from __future__ import annotations

import json
import os
import platform
import sys

import jax
import ml_collections

CONFIG_FILE = "config.json"
RUN_FILE = "run.json"
# Keys that may differ between the run that made a workdir and a rerun that resumes it: they change
# presentation only, never the trajectory.
MAY_DIFFER_ON_RESUME = ("progress_bar",)


class ConfigMismatchError(ValueError):
    pass


def config_to_dict(config) -> dict:
    """JSON-ready dict (tuples -> lists) of a ConfigDict."""
    d = config.to_dict() if isinstance(config, ml_collections.ConfigDict) else dict(config)
    return json.loads(json.dumps(d, default=lambda o: list(o) if isinstance(o, tuple) else str(o)))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_diff(a: dict, b: dict) -> list[str]:
    fa, fb = _flatten(a), _flatten(b)
    keys = sorted(set(fa) | set(fb))
    return [f"{k}: {fa.get(k, '<absent>')!r} (workdir) != {fb.get(k, '<absent>')!r} (now)"
            for k in keys if fa.get(k, "<absent>") != fb.get(k, "<absent>") and k not in MAY_DIFFER_ON_RESUME]


def load_saved_config(workdir: str) -> ml_collections.ConfigDict | None:
    path = os.path.join(workdir, CONFIG_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return ml_collections.ConfigDict(json.load(f))


def check_or_save_config(config, workdir: str, write: bool) -> bool:
    """Save the config into a fresh workdir, or check it equals the saved one. Returns True when the
    workdir already held this config (a resume)."""
    path = os.path.join(workdir, CONFIG_FILE)
    now = config_to_dict(config)
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        diff = config_diff(saved, now)
        if diff:
            raise ConfigMismatchError(
                f"Workdir {workdir} holds a run with a different config ({path}); refusing to mix "
                f"runs. Use a new --workdir, or the original config. Differences:\n  " + "\n  ".join(diff)
            )
        return True
    if write:
        os.makedirs(workdir, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    return False


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
