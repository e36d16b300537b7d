"""One jitted train step (donated state): predict -> rasterize every Gaussian set on the targets ->
loss terms -> grads.

Parameters are float32; a family computes each of its parts in the dtype its config gives it
(`locojax.models.common.precision`). The Gaussians are cast to float32 before rasterisation.

A step whose loss or gradients are not all finite leaves params and optimizer state unchanged and
increments the non-finite counters (the step counter advances: the batch was consumed).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from locojax.render.factory import render_sets
from locojax.models.interface import FINAL
from locojax.train.grad_norm import global_norm as bucketed_global_norm
from locojax.train.state import TrainState


def cast_floats(tree, dtype):
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree
    )


def batch_psnr(rgb, target):
    """Mean over views of per-image PSNR for images in [0, 1] (training log only)."""
    mse = jnp.mean((jnp.clip(rgb, 0.0, 1.0) - target) ** 2, axis=(-3, -2, -1))
    return jnp.mean(-10.0 * jnp.log10(jnp.maximum(mse, 1e-10)))


def global_norm(tree):
    tree_mod = getattr(optax, "tree", None)
    if tree_mod is not None and hasattr(tree_mod, "norm"):
        return tree_mod.norm(tree)
    return optax.global_norm(tree)


def apply_gradients(tx, state: TrainState, loss, grads, norm_concat_below: int | None = None):
    """The optimizer half of a train step: (new state, global grad norm, finite flag).

    `norm_concat_below`: `locojax.train.grad_norm.concat_limit(config.sharding)`.

    A step whose loss or gradient norm is not finite keeps params and optimizer state and counts a
    non-finite step; the step counter advances either way.
    """
    # One reduction serves the finiteness test and the logged norm: the norm is NaN/inf iff a
    # gradient entry is (or the squares overflow float32, a step worth skipping too). A per-leaf
    # isfinite + all stacked over the 485 leaves of the 16k model (and a second norm of the
    # zeroed gradients) made its XLA:CPU compile 499 s and 14 GB instead of 61 s and 3.1 GB.
    # Bucketed (locojax.train.grad_norm): a few kernels instead of one to three per leaf.
    grad_norm = bucketed_global_norm(grads, concat_below=norm_concat_below)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    # Zeroed grads keep NaNs out of the optimizer's arithmetic on the discarded branch.
    safe_grads = jax.tree_util.tree_map(lambda g: jnp.where(finite, g, jnp.zeros_like(g)), grads)
    # The norm goes to an optimizer that can reuse it (locojax.train.fused_adamw,
    # optimizer.clip_by_global_norm) rather than reduce every leaf again; where finite, safe_grads == grads.
    extra = dict(global_norm=grad_norm) if isinstance(tx, optax.GradientTransformationExtraArgs) else {}
    updates, new_opt_state = tx.update(safe_grads, state.opt_state, state.params, **extra)
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
    return new_state, grad_norm, finite


def make_train_step(model, tx, schedule, render, norm_concat_below: int | None = None) -> Callable:
    """(state, batch) -> (state, metrics dict of scalars). Not jitted here (see `jit_train_step`).

    `render` is `locojax.render.factory.make_render_fn(config.render, model.sh_degree)`;
    `norm_concat_below` is `locojax.train.grad_norm.concat_limit(config.sharding)`."""

    def loss_fn(params, batch, step, rng):
        rng_predict, rng_loss = jax.random.split(rng)
        pred = model.predict(params, batch.context, step=step, train=True, rng=rng_predict)
        pred = pred.replace(gaussians=cast_floats(pred.gaussians, jnp.float32),
                            extra=cast_floats(dict(pred.extra), jnp.float32))
        renders = render_sets(render, pred.render_sets(), batch.target)
        terms = model.loss_terms(params, batch, pred, renders, step=step, rng=rng_loss)
        loss = sum(jnp.asarray(t.weight, jnp.float32) * t.value.astype(jnp.float32) for t in terms.values())
        logs = {f"loss/{k}": t.value.astype(jnp.float32) for k, t in terms.items()}
        final = renders[FINAL]
        logs["psnr"] = batch_psnr(final.rgb.astype(jnp.float32), batch.target.images)
        # Capacity overflow and dropped Gaussians are counted over every rendered set.
        logs["overflow"] = sum(jnp.sum(r.overflow) for r in renders.values()).astype(jnp.int32)
        logs["num_invalid"] = sum(jnp.sum(r.num_invalid) for r in renders.values()).astype(jnp.int32)
        return loss, logs

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def train_step(state: TrainState, batch):
        rng = jax.random.fold_in(state.rng, state.step)
        (loss, logs), grads = grad_fn(state.params, batch, state.step, rng)
        new_state, grad_norm, finite = apply_gradients(tx, state, loss, grads, norm_concat_below)
        skipped = (~finite).astype(jnp.int32)
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
