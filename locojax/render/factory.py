"""`make_render_fn(config.render, sh_degree)`: the renderer the trainer and evaluator hand around.

    render = make_render_fn(config.render, sh_degree=3)
    out = render(gaussians [B, N, ...], target Views [B, V, ...])       # RenderOutput [B, V, ...]
    outs = render_sets(render, {"final": g, "coarse": g2}, target)     # one rasterisation per size

`render_config.backend`: "auto", "xla" or "pallas" -> `locojax.render.rasterize_batch` with that
compositing backend (chosen per platform at lowering time, `locojax.render.composite_backends`;
"tile" is kept as an alias of "xla"); "dense" -> the O(P*N) reference
`locojax.render.dense.rasterize_dense` vmapped; "module:function" -> any function with
rasterize_batch's signature (tests, experiments). The other keys (background, near, far, eps2d) are
passed through, and so are the named tiling / capacity keys (tile_size, subtile_size, chunk,
max_pairs, tile_capacity; `locojax.render.config_keys`) that differ from their default: "dense" has
no tiles and refuses those with a one-line error naming the key.
"""

from __future__ import annotations

import importlib
from functools import partial
from typing import Callable, Mapping

import jax
import jax.numpy as jnp

from locojax.geometry.cameras import cameras_from_views
from locojax.render.config_keys import tile_key_defaults, tile_options
from locojax.types import Gaussians, RenderOutput


def make_render_fn(render_config, sh_degree: int) -> Callable:
    """(gaussians [B, N, ...], target Views [B, V, ...]) -> RenderOutput [B, V, ...]."""
    rc = render_config
    backend = "xla" if rc.backend == "tile" else rc.backend
    if backend in ("auto", "xla", "pallas"):
        from locojax.render.rasterize import rasterize_batch

        fn = partial(rasterize_batch, backend=backend)
    elif backend == "dense":
        from locojax.render.dense import rasterize_dense

        def fn(gaussians, cameras, **kw):
            per_cam = jax.vmap(lambda g, c: rasterize_dense(g, c, **kw), in_axes=(None, 0))
            return jax.vmap(per_cam)(gaussians, cameras)
    elif ":" in backend:
        mod, name = backend.split(":", 1)
        fn = getattr(importlib.import_module(mod), name)
    else:
        raise ValueError(f"config.render.backend={rc.backend!r}: expected 'auto', 'xla', 'pallas', 'dense', "
                         f"'module:function' or 'tile' (alias of 'xla')")
    options = tile_options(rc)
    if backend == "dense" and options:
        key, value = next(iter(options.items()))
        raise ValueError(f"config.render.{key}={value}: backend 'dense' (the O(P*N) reference) has no tiles; "
                         f"leave it at its default {tile_key_defaults()[key]} or use backend 'auto', 'xla' or 'pallas'")
    background = jnp.asarray(rc.background, jnp.float32)

    def render(gaussians: Gaussians, target_views):
        height, width = target_views.image_shape
        return fn(
            gaussians,
            cameras_from_views(target_views),
            width=width,
            height=height,
            sh_degree=sh_degree,
            background=background,
            near=float(rc.near),
            far=float(rc.far),
            eps2d=float(rc.eps2d),
            **options,
        )

    return render


def render_sets(render: Callable, sets: Mapping[str, Gaussians], target_views) -> dict[str, RenderOutput]:
    """Render every named set [B, N_k, ...] on the same targets [B, V, ...].

    Sets with the same Gaussian count are stacked along the scene axis and rasterised in one call
    (one compositing loop for all of them); the outputs are split back per name, in order."""
    names = list(sets)
    groups: dict[int, list[str]] = {}
    for name in names:
        groups.setdefault(sets[name].means.shape[-2], []).append(name)
    out = {}
    for members in groups.values():
        if len(members) == 1:
            out[members[0]] = render(sets[members[0]], target_views)
            continue
        b = sets[members[0]].means.shape[0]
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, 0), *(sets[m] for m in members))
        views = jax.tree_util.tree_map(lambda x: jnp.concatenate([x] * len(members), 0), target_views)
        r = render(stacked, views)
        for i, m in enumerate(members):
            out[m] = jax.tree_util.tree_map(lambda x, i=i: x[i * b:(i + 1) * b], r)
    return {name: out[name] for name in names}
