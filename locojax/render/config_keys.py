"""`config.render`'s named rasteriser keys: tile_size, subtile_size, chunk, max_pairs, tile_capacity.

    options = tile_options(config.render)   # {key: value} of the keys set away from their default
    rasterize_batch(gaussians, cameras, ..., **options)

The defaults are `rasterize_batch`'s keyword defaults, read from its signature so that they are
written once (None: derived there from the image size and Gaussian count; see `locojax.render`).
Only the tile backends take them; `make_render_fn` refuses a non-default value with backend "dense".
Run directories written before the keys were named hold them in a `render.capacities` section (open,
empty by default); `tile_options` reads that section, and `upgrade_render_section` turns a saved
`render` dict into today's keys, so old run directories load, resume and evaluate unchanged.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Mapping, Optional

TILE_KEYS = ("tile_size", "subtile_size", "chunk", "max_pairs", "tile_capacity")
LEGACY_SECTION = "capacities"  # the section the keys lived in before they were named


def tile_key_defaults() -> dict[str, Optional[int]]:
    """{key: rasterize_batch's default} for every key of `TILE_KEYS` (None: derived per call)."""
    from locojax.render.rasterize import rasterize_batch

    params = inspect.signature(rasterize_batch).parameters
    return {k: params[k].default for k in TILE_KEYS}


def _value(key: str, value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"config.render.{key}={value!r}: expected an integer or None")
    return int(value)


def _legacy(render: Mapping) -> dict:
    """The keys of an old `render.capacities` section, checked against `TILE_KEYS`."""
    section = render.get(LEGACY_SECTION, None) or {}
    out = {}
    for key in section.keys():
        if key not in TILE_KEYS:
            close = difflib.get_close_matches(key, TILE_KEYS, n=2)
            raise ValueError(f"config.render.{LEGACY_SECTION}.{key} is not a rasteriser key; closest: {close}; "
                             f"the keys are config.render.{{{','.join(TILE_KEYS)}}}")
        out[key] = _value(f"{LEGACY_SECTION}.{key}", section[key])
    return out


def tile_options(render_config) -> dict:
    """The named keys of a `config.render` section that differ from their default.

    Args:
      render_config: `config.render` (ConfigDict or dict); absent keys take their default, and the
        keys of a legacy `capacities` section count as the named keys.

    Returns:
      {key: int} rasterize_batch keyword arguments ({} at the defaults).

    Raises:
      ValueError: naming `config.render.<key>` for a non-integer value, an unknown key of
        `render.capacities`, or a key set both there and by name to different values.
    """
    defaults = tile_key_defaults()
    legacy = _legacy(render_config)
    out = {}
    for key in TILE_KEYS:
        value = _value(key, render_config.get(key, defaults[key]))
        if key in legacy:
            if value != defaults[key] and value != legacy[key]:
                raise ValueError(f"config.render.{key}={value} and config.render.{LEGACY_SECTION}.{key}="
                                 f"{legacy[key]} disagree; set config.render.{key} only")
            value = legacy[key]
        if value != defaults[key]:
            out[key] = value
    return out


def upgrade_render_section(render: dict) -> dict:
    """A saved config's `render` dict (config.json) with today's keys: a legacy `capacities` section
    folded into the named keys (and removed), absent named keys at their defaults. Other keys are
    kept as they are; a dict already in today's form comes back equal."""
    out = {k: v for k, v in render.items() if k != LEGACY_SECTION}
    for key, default in tile_key_defaults().items():
        out.setdefault(key, default)
    out.update(tile_options(render))
    return out
