"""Named configs: `<family>_<preset>` -> `configs/<family>.py:get_config("<preset>")`.

    from configs import get_config, config_names, apply_overrides
    config = get_config("globalsplat_tiny")
    apply_overrides(config, ["total_steps=10", "optimizer.learning_rate=1e-3"])

A family module lists its presets in `PRESETS`; the table below is the fallback for modules that
do not (and documents what is expected to exist).
"""

from __future__ import annotations

import ast
import difflib
import importlib
from typing import Iterable, Sequence

import ml_collections

# family module (configs/<family>.py) -> preset names it accepts when it has no PRESETS attribute.
_FAMILIES = {
    "globalsplat": ("16k", "tiny"),
    "locosplat": (),
    "locusgs": (),
    "tokengs": (),
}


def _family_presets(family: str) -> tuple[str, ...]:
    try:
        module = importlib.import_module(f"configs.{family}")
    except ModuleNotFoundError as e:
        if e.name == f"configs.{family}":
            return ()
        raise
    return tuple(getattr(module, "PRESETS", _FAMILIES.get(family, ())))


def config_names() -> list[str]:
    """Every valid `--config=` name, sorted."""
    return sorted(f"{fam}_{p}" for fam in _FAMILIES for p in _family_presets(fam))


def get_config(name: str) -> ml_collections.ConfigDict:
    """The resolved preset `name`; an unknown name raises ValueError listing the valid ones."""
    names = config_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"Unknown config {name!r}.{hint} Valid configs: {', '.join(names) or '(none)'}")
    family, preset = name.split("_", 1)
    config = importlib.import_module(f"configs.{family}").get_config(preset)
    if not config.get("model_family"):
        config.model_family = family
    return config


def _literal_or_str(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parse_value(text: str, current, key: str):
    """`text` parsed to the type of the existing value `current` (bool/int/float/str/tuple/None)."""
    if isinstance(current, bool):
        low = text.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f"--config.{key}: expected a bool (true/false), got {text!r}")
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError:
            f = float(text)  # accept "1e3"
            if f != int(f):
                raise ValueError(f"--config.{key}: expected an int, got {text!r}") from None
            return int(f)
    if isinstance(current, float):
        return float(text)
    if isinstance(current, str):
        return text
    if isinstance(current, (tuple, list)):
        value = ast.literal_eval(text) if text.strip()[:1] in "([" else tuple(
            _literal_or_str(t.strip()) for t in text.split(",") if t.strip())
        if not isinstance(value, (tuple, list)):
            value = (value,)
        if current and all(isinstance(v, float) for v in current):
            value = tuple(float(v) for v in value)
        return type(current)(value)
    # None or anything else: a Python literal if it parses as one, the string otherwise.
    if text.strip().lower() == "none":
        return None
    return _literal_or_str(text)


def _all_keys(config: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
    out = []
    for k, v in config.items():
        out.append(prefix + k)
        if isinstance(v, ml_collections.ConfigDict):
            out += _all_keys(v, prefix + k + ".")
    return out


def apply_overrides(config: ml_collections.ConfigDict, overrides: Iterable[str]) -> ml_collections.ConfigDict:
    """Apply "a.b.c=VALUE" strings in place; the value's type comes from the existing value.

    Unknown keys raise ValueError naming the closest existing keys. A key inside a ConfigDict that
    is empty by design (e.g. `optimizer.group_learning_rates.backbone`) may be added.
    """
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"Config override {item!r} is not of the form KEY=VALUE")
        key, text = item.split("=", 1)
        key = key.strip()
        if key.startswith("config."):
            key = key[len("config."):]
        *parents, leaf = key.split(".")
        node = config
        for i, p in enumerate(parents):
            if p not in node or not isinstance(node[p], ml_collections.ConfigDict):
                close = difflib.get_close_matches(key, _all_keys(config), n=3)
                raise ValueError(f"Unknown config key {key!r} (no section {'.'.join(parents[:i + 1])!r})."
                                 f" Close keys: {close}")
            node = node[p]
        if leaf not in node:
            if len(node) == 0 and parents:  # an open mapping such as group_learning_rates
                node[leaf] = _parse_value(text, None, key)
                continue
            close = difflib.get_close_matches(key, _all_keys(config), n=3)
            raise ValueError(f"Unknown config key {key!r}. Close keys: {close}")
        current = node[leaf]
        if isinstance(current, ml_collections.ConfigDict):
            raise ValueError(f"Config key {key!r} is a section; set one of its fields instead")
        value = _parse_value(text, current, key)
        try:
            node[leaf] = value
        except TypeError:
            # A FieldReference typed None-able field (e.g. int) given another type: reset it.
            with node.unlocked():
                del node[leaf]
                node[leaf] = value
    return config


def parse_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split argv into `--config.KEY=VALUE` overrides (returned as "KEY=VALUE") and the rest."""
    overrides, rest = [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--config."):
            body = a[len("--config."):]
            if "=" not in body:  # "--config.key value"
                if i + 1 >= len(argv):
                    raise ValueError(f"{a}: missing value")
                body = f"{body}={argv[i + 1]}"
                i += 1
            overrides.append(body)
        else:
            rest.append(a)
        i += 1
    return overrides, rest
