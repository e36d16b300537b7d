"""`from_mapping(cls, section_mapping, "model")`: a family's frozen config dataclass from its ConfigDict.

Every family writes each default once, in a frozen dataclass (`ModelConfig` for `config.model`,
`LossConfig` for `config.loss`); `configs/<family>.py` builds ConfigDicts from the dataclasses
(`as_dict`) and presets change single values; the family's `build(config)` reads them back here.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Iterable, Mapping, Optional


def cast_like(default, value):
    """`value` as the type of the dataclass field's `default`: a sequence becomes a tuple (ConfigDicts
    loaded from JSON hold lists), a number / string / bool the default's type; other defaults (None,
    objects) leave `value` as it is."""
    if isinstance(default, tuple):
        return tuple(value)
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, (int, float, str)):
        return type(default)(value)
    return value


def from_mapping(cls, mapping, section: str, *, nested: Optional[Mapping[str, type]] = None,
                 extra_keys: Iterable[str] = ()):
    """A `cls` dataclass from a ConfigDict / dict section.

    Args:
      cls: a dataclass type.
      mapping: the section (`config.model`, `config.loss`, ...); keys absent take the field default.
      section: its dotted name under `config`, for messages ("model", "model.depth").
      nested: field name -> dataclass of that sub-section (read recursively, named `section.field`).
      extra_keys: keys the section may hold that are not fields (run-wide switches read elsewhere);
        they are skipped.

    Returns:
      `cls(**values)` with every value cast to its default's type (`cast_like`).

    Raises:
      ValueError: `config.<section>.<key> is not a key of <cls>` naming the closest valid keys.
    """
    nested = dict(nested or {})
    extra_keys = tuple(extra_keys)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key in mapping.keys():
        if key in extra_keys:
            continue
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields) + list(extra_keys), n=3)
            raise ValueError(f"config.{section}.{key} is not a key of {cls.__name__}; closest: {close}; "
                             f"valid: {sorted(fields) + sorted(extra_keys)}")
        if key in nested:
            values[key] = from_mapping(nested[key], mapping[key], f"{section}.{key}")
        else:
            values[key] = cast_like(fields[key].default, mapping[key])
    return cls(**values)


def as_dict(cfg) -> dict:
    """A config dataclass (nested dataclasses included) -> nested dict, for ConfigDicts."""
    return dataclasses.asdict(cfg)
