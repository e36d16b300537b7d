"""Presets by name: `configs/<family>.py` files with `PRESETS` and `get_config(preset)` are found
automatically (`families`), and `load_config` reads a name, a family file or a run's `config.json`."""

from __future__ import annotations

import difflib
import functools
import importlib
import json
import os
import pkgutil

import ml_collections

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def families() -> dict[str, tuple[str, ...]]:
    """{family module name: its PRESETS} for every `configs/<family>.py` with PRESETS and get_config."""
    out = {}
    for info in pkgutil.iter_modules([CONFIG_DIR]):
        if info.ispkg or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"configs.{info.name}")
        if hasattr(module, "PRESETS") and callable(getattr(module, "get_config", None)):
            out[info.name] = tuple(module.PRESETS)
    return out


def config_names() -> list[str]:
    """Every valid `--config=` name, sorted."""
    return sorted(f"{fam}_{p}" for fam, presets in families().items() for p in presets)


def split_name(name: str) -> tuple[str, str]:
    """`<family>_<preset>` -> (family, preset); the longest family name that prefixes `name` wins."""
    for fam in sorted(families(), key=len, reverse=True):
        if name.startswith(fam + "_") and name[len(fam) + 1:] in families()[fam]:
            return fam, name[len(fam) + 1:]
    names = config_names()
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"Unknown config {name!r}.{hint} Valid configs: {', '.join(names) or '(none)'}"
                     " (or a file: --config=configs/<family>.py:<preset>)")


def get_config(name: str) -> ml_collections.ConfigDict:
    """The preset `name` (`<family>_<preset>`); an unknown name raises ValueError listing the valid ones."""
    family, preset = split_name(name)
    config = importlib.import_module(f"configs.{family}").get_config(preset)
    if not config.get("model_family"):
        config.model_family = family
    return config


def load_config(spec: str) -> ml_collections.ConfigDict:
    """A config from `--config=SPEC`: a name (`globalsplat_16k`), a family file with its preset
    (`configs/globalsplat.py:16k`), or a run's saved `config.json`."""
    path, _, arg = spec.partition(":")
    if path.endswith(".json"):
        return config_from_json(path)
    if path.endswith(".py"):
        if not os.path.exists(path):
            raise ValueError(f"no such file {path}")
        family = os.path.splitext(os.path.basename(path))[0]
        if os.path.dirname(os.path.abspath(path)) == CONFIG_DIR and family in families():
            return get_config(f"{family}_{arg or families()[family][0]}")
        from ml_collections.config_flags import config_flags

        module = config_flags._LoadConfigModule(f"{family}_config", path)  # another file: load it
        return module.get_config(*([arg] if arg else []))
    return get_config(spec)


def _tuples(value):
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def config_from_json(path: str) -> ml_collections.ConfigDict:
    """A run's `config.json` as a ConfigDict (lists back to tuples; a null leaf takes any literal)."""
    if not os.path.exists(path):
        raise ValueError(f"no such file {path}")
    try:
        with open(path) as f:
            raw = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None

    def build(d):
        out = ml_collections.ConfigDict()
        for k, v in d.items():
            if isinstance(v, dict):
                out[k] = build(v)
            elif v is None:
                out[k] = ml_collections.FieldReference(None, field_type=object)
            else:
                out[k] = v
        return out

    return build(_tuples(raw))
