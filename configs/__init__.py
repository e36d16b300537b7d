"""Configs, big_vision style: `configs/<family>.py` defines `PRESETS` and `get_config(preset)`.

Every module of this package with both is a family, found automatically; its configs are named
`<family>_<preset>` (e.g. `globalsplat_16k` -> `configs/globalsplat.py:get_config("16k")`).

    import configs
    config = configs.get_config("globalsplat_tiny")            # or "configs/globalsplat.py:tiny"
    configs.apply_overrides(config, ["total_steps=10", "optimizer.learning_rate=1e-3"])

The entry points take the same through absl flags (`--config=NAME --config.KEY=VALUE`), parsed by
`ml_collections.config_flags` (see `configs/flags.py`); `apply_overrides` goes through the same parser.
"""

from __future__ import annotations

from typing import Iterable

import ml_collections

from configs import flags
from configs.loading import CONFIG_DIR, config_from_json, config_names, families, get_config, load_config, split_name

__all__ = ["CONFIG_DIR", "apply_overrides", "config_from_json", "config_names", "families", "get_config",
           "load_config", "split_name"]


def apply_overrides(config: ml_collections.ConfigDict, overrides: Iterable[str]) -> ml_collections.ConfigDict:
    """Apply "a.b.c=VALUE" strings in place, parsed exactly as `--config.a.b.c=VALUE` on the command
    line (ml_collections.config_flags, then `configs.flags.validate`); errors raise ValueError."""
    return flags.apply_overrides(config, list(overrides))
