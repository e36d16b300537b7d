"""`config.render`'s named rasteriser keys (tile_size, subtile_size, chunk, max_pairs, tile_capacity):
they reach the rasteriser, "dense" refuses them, and a run directory saved with the old
`render.capacities` section still loads and resumes against today's presets."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import configs
from locojax.render.config_keys import TILE_KEYS, tile_options, upgrade_render_section
from locojax.render.factory import make_render_fn
from locojax.train.run_dir import config_changes, config_to_dict
from locojax.types import Gaussians, Views
from tests.render.render_scenes import random_scene


def _old_render(render: dict, capacities: dict) -> dict:
    """A `render` section as run directories saved it before the keys were named."""
    old = {k: v for k, v in render.items() if k not in TILE_KEYS}
    old["capacities"] = dict(capacities)
    return old


def test_max_pairs_reaches_the_rasteriser():
    """The pair buffer of the lowered render has `render.max_pairs` rows instead of the derived
    default (16384 for 20 Gaussians on one tile; lowering only, no compilation)."""
    arrays, viewmat, k = random_scene(20, width=16, height=16, sh_degree=0)
    g = Gaussians(**{n: jnp.asarray(a)[None] for n, a in arrays.items()})
    views = Views(images=jnp.zeros((1, 1, 16, 16, 3)),
                  intrinsics=jnp.asarray((k / np.array([[16.0], [16.0], [1.0]]))[None, None], jnp.float32),
                  c2w=jnp.asarray(np.linalg.inv(viewmat)[None, None], jnp.float32), near=jnp.full((1, 1), 0.01),
                  far=jnp.full((1, 1), 100.0), index=jnp.zeros((1, 1), jnp.int32))
    render = configs.get_config("locusgs_tiny").render
    render.backend = "xla"
    render.max_pairs = 23456
    text = jax.jit(make_render_fn(render, sh_degree=0)).lower(g, views).as_text()
    assert "tensor<23456xi32>" in text and "tensor<16384xi32>" not in text


def test_named_keys_parse_and_dense_refuses_them():
    config = configs.get_config("locusgs_tiny")
    assert tile_options(config.render) == {}  # the defaults: nothing passed, as before
    configs.apply_overrides(config, ["render.max_pairs=100000", "render.subtile_size=16"])
    assert tile_options(config.render) == {"max_pairs": 100000, "subtile_size": 16}
    config.render.subtile_size = None
    config.render.backend = "dense"
    with pytest.raises(ValueError, match=r"config.render.max_pairs=100000: backend 'dense'"):
        make_render_fn(config.render, sh_degree=0)
    config.render.max_pairs = None
    assert callable(make_render_fn(config.render, sh_degree=0))
    with pytest.raises(ValueError, match="unknown config key; closest valid keys: render.max_pairs"):
        configs.apply_overrides(config, ["render.capacities.max_pairs=5"])


def test_old_capacities_section_loads_and_resumes():
    now = config_to_dict(configs.get_config("locusgs_tiny"))
    saved = copy.deepcopy(now)
    saved["render"] = _old_render(now["render"], {})
    assert config_changes(saved, now) == []  # an old run directory resumes with today's preset
    saved["render"] = _old_render(now["render"], {"max_pairs": 100000})
    assert upgrade_render_section(saved["render"]) == {**now["render"], "max_pairs": 100000}
    assert config_changes(saved, now) == [("render.max_pairs", 100000, None)]
    assert tile_options(ml_collections.ConfigDict(saved["render"])) == {"max_pairs": 100000}
    # the key the old docstring suggested never existed: named, with the closest real one
    saved["render"]["capacities"] = {"max_tile_pairs": 1}
    with pytest.raises(ValueError, match=r"config.render.capacities.max_tile_pairs .*closest: \['max_pairs'\]"):
        make_render_fn(ml_collections.ConfigDict(saved["render"]), sh_degree=0)
