"""Pretrained weights from a user's file -> a run directory (what `python -m experiments.import_weights`
runs), and `init_params_from` for `train --init_from=DIR`.

The family's converter is `locojax.models.<family>.convert.import_weights(state_dict, config, kind)`:

    state_dict: {name: array} as read from the file (numpy arrays; torch tensors already converted)
    config:     the run's resolved ConfigDict
    kind:       which layout the file has ("official" by default; a family may accept others, e.g. a
                backbone-only checkpoint)
    returns:    the Flax params it fills (nested dict of numpy arrays, a sub-tree of the model's
                params). It must raise ValueError naming every unmatched key / shape itself.

Params the converter does not return (e.g. frozen LPIPS-VGG weights, or heads a backbone-only import
leaves untrained) keep the model's fresh initialisation; the command lists them. The result is saved
as an ordinary checkpoint at step 0 with the run's `config.json`, so `evaluate`, `render` and
`train --init_from` use it like any trained run. Nothing is downloaded: the file is the user's.
"""

from __future__ import annotations

import importlib
import os
from typing import Mapping

import jax
import numpy as np
from flax import traverse_util

from locojax.train import checkpoint as ckpt
from locojax.train.aot import placeholder_batch
from locojax.train.loop import build_run
from locojax.train.run_dir import check_or_save_config, write_run_json
from locojax.train.state import count_params, create_state

_WRAPPERS = ("state_dict", "model", "model_state_dict", "module")


class ParamsMismatchError(ValueError):
    """Imported or `--init_from` params that do not fit the model (one line naming the keys)."""


def load_state_dict(path: str) -> dict:
    """{name: numpy array} from a .npz, or a torch checkpoint (.pth/.pt/.ckpt; loaded with
    weights_only=True, unwrapping a "state_dict"/"model" entry). torch is imported only here."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--from={path}: no such file")
    if path.endswith(".npz"):
        with np.load(path) as f:
            return {k: np.asarray(f[k]) for k in f.files}
    try:
        import torch
    except ImportError:
        raise ImportError(f"--from={path}: reading a torch checkpoint needs torch "
                          "(pip install 'locojax[convert]'), or save it as .npz") from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        raise ValueError(f"--from={path}: not a readable torch checkpoint ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None
    while isinstance(obj, Mapping):
        inner = next((obj[k] for k in _WRAPPERS if isinstance(obj.get(k), Mapping)), None)
        if inner is None:
            break
        obj = inner
    if not isinstance(obj, Mapping):
        raise ValueError(f"--from={path}: expected a state_dict (name -> tensor), got {type(obj).__name__}")
    return {k: v.detach().cpu().float().numpy() if hasattr(v, "detach") else np.asarray(v)
            for k, v in obj.items() if hasattr(v, "shape")}


def family_converter(family: str):
    try:
        module = importlib.import_module(f"locojax.models.{family}.convert")
    except ModuleNotFoundError:
        module = None
    if module is None or not hasattr(module, "import_weights"):
        from locojax.models.registry import available_families

        have = [f for f in available_families()
                if importlib.util.find_spec(f"locojax.models.{f}.convert") is not None]
        raise ValueError(f"--family={family}: no converter locojax.models.{family}.convert.import_weights; "
                         f"families with one: {', '.join(have) or '(none)'}")
    return module.import_weights


def _merge(imported: dict, fresh, where: str) -> tuple[dict, list[str]]:
    """Imported leaves replace the `fresh` ones (arrays, or ShapeDtypeStructs when every leaf is
    imported); shapes must agree. Returns (params as numpy, top-level groups left fresh)."""
    flat_init = traverse_util.flatten_dict(fresh)
    flat_new = traverse_util.flatten_dict(imported)
    unknown = sorted("/".join(p) for p in flat_new if p not in flat_init)
    bad = [f"{'/'.join(p)} {tuple(np.shape(v))} != {tuple(flat_init[p].shape)}" for p, v in flat_new.items()
           if p in flat_init and tuple(np.shape(v)) != tuple(flat_init[p].shape)]
    if unknown or bad:
        raise ParamsMismatchError(f"{where}: params do not fit the model: "
                         + "; ".join(([f"unknown {unknown[:5]}"] if unknown else []) + bad[:5]))
    kept = sorted({p[0] for p in flat_init if p not in flat_new})
    merged = {p: np.asarray(flat_new[p], flat_init[p].dtype) if p in flat_new else np.asarray(flat_init[p])
              for p in flat_init if p in flat_new or not isinstance(flat_init[p], jax.ShapeDtypeStruct)}
    return traverse_util.unflatten_dict(merged), kept


def import_weights(family: str, source: str, workdir: str, config, kind: str = "official",
                   verbose: bool = True) -> dict:
    """Convert `source` with the family's converter and save it as step 0 of the run in `workdir`.
    Returns {"checkpoint", "kept_init" (top-level param groups not imported), "num_params"}."""
    workdir = os.path.abspath(workdir)
    if config.get("model_family") != family:
        raise ValueError(f"--family={family} but the config's model_family is {config.get('model_family')!r}")
    if os.path.isdir(os.path.join(workdir, ckpt.CHECKPOINT_DIR)) and os.listdir(
            os.path.join(workdir, ckpt.CHECKPOINT_DIR)):
        raise ValueError(f"--workdir={workdir} already holds checkpoints; import into a new directory")
    convert = family_converter(family)
    imported = convert(load_state_dict(source), config, kind)
    run = build_run(config, placeholder_batch(config))
    state = create_state(run.init_fn, jax.random.PRNGKey(int(config.seed)), run.example_batch,
                         run.state_shardings)
    params, kept = _merge(imported, jax.device_get(state.params), f"--from={source}")
    state = state.replace(params=jax.device_put(params, run.state_shardings.params))
    check_or_save_config(config, workdir, write=True)
    manager = ckpt.make_manager(workdir, int(config.keep_checkpoints), async_save=False)
    ckpt.save(manager, 0, state, {"processes": [], "imported_from": os.path.abspath(source), "kind": kind})
    manager.wait_until_finished()
    manager.close()
    n = count_params(imported)
    write_run_json(workdir, config, num_params=n, num_gaussians=run.model.num_gaussians,
                   extra=dict(imported_from=os.path.abspath(source), import_kind=kind))
    out = dict(checkpoint=os.path.join(workdir, ckpt.CHECKPOINT_DIR, "0"), kept_init=kept, num_params=n)
    if verbose:
        print(f"imported {n:,} parameters from {source} ({family}, {kind}) -> {out['checkpoint']}")
        if kept:
            print(f"not in the file, kept at their initialisation: {', '.join(kept)}")
    return out


def init_params_from(source_workdir: str, run, step=None):
    """The params of checkpoint `step` (default: the latest) of the run in `source_workdir`, in this
    run's shardings; ValueError when they do not fit this run's model."""
    source_workdir = os.path.abspath(source_workdir)
    if not os.path.isdir(os.path.join(source_workdir, ckpt.CHECKPOINT_DIR)):
        raise FileNotFoundError(f"--init_from={source_workdir}: no checkpoints/ there")
    manager = ckpt.make_manager(source_workdir, 1000, async_save=False)
    try:
        steps = sorted(manager.all_steps())
        if not steps:
            raise FileNotFoundError(f"--init_from={source_workdir}: no complete checkpoint")
        step = steps[-1] if step is None else int(step)
        raw = ckpt.restore_raw_params(manager, step)
    finally:
        manager.close()
    params, kept = _merge(raw, run.abstract_state.params, f"--init_from={source_workdir} (step {step})")
    if kept:
        raise ParamsMismatchError(f"--init_from={source_workdir} (step {step}): no values for {', '.join(kept)}")
    return jax.device_put(params, run.state_shardings.params), step
