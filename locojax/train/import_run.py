"""Pretrained weights from a user's file -> a run directory (what `python -m experiments.import_weights`
runs), `init_params_from` for `train --init_from=DIR`, and `start_run_from_params`, the new run directory
with given params as checkpoint 0 that `import_weights` and `experiments.expand_tokens` write.

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
from locojax.train.run import build_run, placeholder_batch
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


def merge_params(imported: dict, fresh, where: str) -> tuple[dict, list[str]]:
    """Imported leaves replace the `fresh` ones; shapes must agree.

    Args:
      imported: nested dict of arrays, a sub-tree of the model's params.
      fresh: the model's params (arrays, or ShapeDtypeStructs when every leaf is imported).
      where: how errors name the imported params' source (e.g. "--from=FILE").
    Returns:
      (params as numpy in the fresh dtypes, top-level groups left fresh); ParamsMismatchError (one
      line) for imported keys the model does not have or shapes that differ.
    """
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
    out = start_run_from_params(config, workdir, imported, where=f"--from={source}",
                                data_state={"imported_from": os.path.abspath(source), "kind": kind},
                                run_json=dict(imported_from=os.path.abspath(source), import_kind=kind))
    if verbose:
        print(f"imported {out['num_params']:,} parameters from {source} ({family}, {kind}) -> {out['checkpoint']}")
        if out["kept_init"]:
            print(f"not in the file, kept at their initialisation: {', '.join(out['kept_init'])}")
    return out


def start_run_from_params(config, workdir: str, params: dict, *, where: str, data_state: dict,
                          run_json: dict, require_all: bool = False) -> dict:
    """Writes a new run directory whose checkpoint 0 holds `params` (the rest of the model's params at
    their fresh initialisation from `config.seed`), with `config.json` and `run.json`, so that
    `evaluate`, `render` and `train --init_from` use it like any trained run.

    Args:
      config: the new run's resolved config.
      workdir: the new run directory; the caller checks that it holds no checkpoint (naming its flag).
      params: nested dict of arrays, a sub-tree of the model's params.
      where: how errors name the params' source (e.g. "--from=FILE").
      data_state: where the params came from, saved beside `{"processes": []}` as the checkpoint's
        data state (no data iterator has run yet).
      run_json: the same for `run.json` (its `extra` fields).
      require_all: every param must be given (ParamsMismatchError naming the missing groups).
    Returns:
      {"checkpoint": path of checkpoint 0, "kept_init": top-level param groups left at their
      initialisation, "num_params": parameters given}.
    """
    workdir = os.path.abspath(workdir)
    run = build_run(config, placeholder_batch(config))
    state = create_state(run.init_fn, jax.random.PRNGKey(int(config.seed)), run.example_batch,
                         run.state_shardings)
    merged, kept = merge_params(params, jax.device_get(state.params), where)
    if require_all and kept:
        raise ParamsMismatchError(f"{where}: no values for {', '.join(kept)}")
    state = state.replace(params=jax.device_put(merged, run.state_shardings.params))
    check_or_save_config(config, workdir, write=True)
    manager = ckpt.make_manager(workdir, int(config.keep_checkpoints), async_save=False)
    ckpt.save(manager, 0, state, {"processes": [], **data_state})
    manager.wait_until_finished()
    manager.close()
    n = count_params(params)
    write_run_json(workdir, config, num_params=n, num_gaussians=run.model.num_gaussians, extra=run_json)
    return dict(checkpoint=os.path.join(workdir, ckpt.CHECKPOINT_DIR, "0"), kept_init=kept, num_params=n)


def init_params_from(source_workdir: str, run, step=None):
    """The params of checkpoint `step` (default: the latest) of the run in `source_workdir`, in this
    run's shardings; ValueError when they do not fit this run's model."""
    source_workdir = os.path.abspath(source_workdir)
    raw, step = ckpt.restore_params(source_workdir, step, flag="--init_from")
    params, kept = merge_params(raw, run.abstract_state.params, f"--init_from={source_workdir} (step {step})")
    if kept:
        raise ParamsMismatchError(f"--init_from={source_workdir} (step {step}): no values for {', '.join(kept)}")
    return jax.device_put(params, run.state_shardings.params), step
