"""One jitted train step (donated state): predict -> rasterize the targets -> loss terms -> grads.

A step whose loss or gradients are not all finite leaves params and optimizer state unchanged and
increments the non-finite counters (the step counter advances: the batch was consumed).
"""

from __future__ import annotations

import importlib
from typing import Callable

import jax
import jax.numpy as jnp
import optax

from locojax.geometry.cameras import cameras_from_views
from locojax.train.state import TrainState
from locojax.types import Gaussians

PRECISIONS = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def make_render_fn(config, sh_degree: int) -> Callable:
    """(gaussians [B, N, ...], target Views [B, V, ...]) -> RenderOutput [B, V, ...].

    `config.render.backend`: "tile" -> `locojax.render.rasterize_batch`; "dense" -> the O(P*N)
    reference `locojax.render.dense.rasterize_dense` vmapped; "module:function" -> any function
    with rasterize_batch's signature (tests, experiments).
    """
    rc = config.render
    backend = rc.backend
    if backend == "tile":
        from locojax.render import rasterize_batch as fn
    elif backend == "dense":
        from locojax.render.dense import rasterize_dense

        def fn(gaussians, cameras, **kw):
            per_cam = jax.vmap(lambda g, c: rasterize_dense(g, c, **kw), in_axes=(None, 0))
            return jax.vmap(per_cam)(gaussians, cameras)
    elif ":" in backend:
        mod, name = backend.split(":", 1)
        fn = getattr(importlib.import_module(mod), name)
    else:
        raise ValueError(f"config.render.backend={backend!r}: expected 'tile', 'dense' or 'module:function'")
    background = jnp.asarray(rc.background, jnp.float32)
    capacities = dict(rc.capacities)

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
            **capacities,
        )

    return render


def cast_floats(tree, dtype):
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree
    )


def compute_context(context, params, precision: str):
    """Params and context images in the compute dtype (cameras stay float32: poses in bfloat16 lose
    too much); float32 is a no-op."""
    dtype = PRECISIONS[precision]
    if dtype == jnp.float32:
        return context, params
    return context.replace(images=context.images.astype(dtype)), cast_floats(params, dtype)


def batch_psnr(rgb, target):
    """Mean over views of per-image PSNR for images in [0, 1] (training log only)."""
    mse = jnp.mean((jnp.clip(rgb, 0.0, 1.0) - target) ** 2, axis=(-3, -2, -1))
    return jnp.mean(-10.0 * jnp.log10(jnp.maximum(mse, 1e-10)))


def global_norm(tree):
    tree_mod = getattr(optax, "tree", None)
    if tree_mod is not None and hasattr(tree_mod, "norm"):
        return tree_mod.norm(tree)
    return optax.global_norm(tree)


def make_train_step(model, tx, schedule, render, precision: str = "float32") -> Callable:
    """(state, batch) -> (state, metrics dict of scalars). Not jitted here (see `jit_train_step`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"config.precision={precision!r}: expected one of {sorted(PRECISIONS)}")

    def loss_fn(params, batch, step, rng):
        rng_predict, rng_loss = jax.random.split(rng)
        context, compute_params = compute_context(batch.context, params, precision)
        gaussians, aux = model.predict(compute_params, context, step=step, train=True, rng=rng_predict)
        gaussians = cast_floats(gaussians, jnp.float32)
        renders = render(gaussians, batch.target)
        terms = model.loss_terms(params, batch, gaussians, aux, renders, step=step, rng=rng_loss)
        loss = sum(jnp.asarray(t.weight, jnp.float32) * t.value.astype(jnp.float32) for t in terms.values())
        logs = {f"loss/{k}": t.value.astype(jnp.float32) for k, t in terms.items()}
        logs["psnr"] = batch_psnr(renders.rgb.astype(jnp.float32), batch.target.images)
        logs["overflow"] = jnp.sum(renders.overflow).astype(jnp.int32)
        logs["num_invalid"] = jnp.sum(renders.num_invalid).astype(jnp.int32)
        return loss, logs

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def train_step(state: TrainState, batch):
        rng = jax.random.fold_in(state.rng, state.step)
        (loss, logs), grads = grad_fn(state.params, batch, state.step, rng)
        # One reduction serves the finiteness test and the logged norm: the norm is NaN/inf iff a
        # gradient entry is (or the squares overflow float32, a step worth skipping too). A per-leaf
        # isfinite + all stacked over the 485 leaves of the 16k model (and a second norm of the
        # zeroed gradients) made its XLA:CPU compile 499 s and 14 GB instead of 61 s and 3.1 GB.
        grad_norm = global_norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        # Zeroed grads keep NaNs out of the optimizer's arithmetic on the discarded branch.
        safe_grads = jax.tree_util.tree_map(lambda g: jnp.where(finite, g, jnp.zeros_like(g)), grads)
        updates, new_opt_state = tx.update(safe_grads, state.opt_state, state.params)
        new_params = optax.apply_updates(state.params, updates)
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
        skipped = (~finite).astype(jnp.int32)
        new_state = state.replace(
            step=state.step + 1,
            params=keep(new_params, state.params),
            opt_state=keep(new_opt_state, state.opt_state),
            num_nonfinite=state.num_nonfinite + skipped,
            consecutive_nonfinite=jnp.where(finite, 0, state.consecutive_nonfinite + 1),
        )
        metrics = dict(logs)
        metrics["loss"] = loss
        metrics["grad_norm"] = jnp.where(finite, grad_norm, 0.0)  # the norm of what was applied
        metrics["lr"] = jnp.asarray(schedule(state.step), jnp.float32)
        metrics["skipped"] = skipped
        metrics["consecutive_nonfinite"] = new_state.consecutive_nonfinite
        metrics["num_nonfinite"] = new_state.num_nonfinite
        return new_state, metrics

    return train_step


def jit_train_step(train_step, state_shardings, batch_shardings, replicated):
    return jax.jit(
        train_step,
        in_shardings=(state_shardings, batch_shardings),
        out_shardings=(state_shardings, replicated),
        donate_argnums=(0,),
    )
