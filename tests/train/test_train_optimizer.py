"""Schedules against their closed forms, parameter groups (per-group lr, frozen), decay masks,
global-norm clipping."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from configs.common import base_config
from locojax.train.optimizer import make_optimizer, make_schedule, weight_decay_mask


def _opt(**kw):
    c = base_config()
    c.total_steps = 100
    for k, v in kw.items():
        c.optimizer[k] = v
    return c


def test_warmup_cosine_closed_form():
    c = _opt(schedule="warmup_cosine", warmup_steps=10, final_lr_fraction=0.1)
    s = make_schedule(c.optimizer, 100, 1.0)
    for t in (0, 5, 10, 40, 99, 100):
        if t <= 10:
            want = t / 10
        else:
            want = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (t - 10) / 90))
        assert abs(float(s(t)) - want) < 1e-6, t


def test_warmup_starts_at_init_fraction():
    # GlobalSplat: torch LinearLR(start_factor=1e-3, total_iters=10) -> lr (1e-3 + (1 - 1e-3) t / 10)
    c = _opt(schedule="warmup_cosine", warmup_steps=10, final_lr_fraction=0.1, warmup_init_fraction=1e-3)
    s = make_schedule(c.optimizer, 100, 1.0)
    for t in (0, 3, 10):
        assert abs(float(s(t)) - (1e-3 + (1 - 1e-3) * t / 10)) < 1e-6, t


def test_one_cycle_closed_form():
    # torch OneCycleLR's phases: up to step pct_start * total - 1 = 24, down to step total - 1 = 99
    c = _opt(schedule="one_cycle", one_cycle_pct_start=0.25, one_cycle_div_factor=25.0,
             one_cycle_final_div_factor=1e4)
    s = make_schedule(c.optimizer, 100, 1.0)
    start, end = 1.0 / 25, 1.0 / 25 / 1e4
    assert abs(float(s(0)) - start) < 1e-7
    assert abs(float(s(24)) - 1.0) < 1e-6 and float(s(25)) < float(s(24))
    assert abs(float(s(99)) - end) < 1e-7
    mid_up = start + (1.0 - start) * 0.5 * (1 - math.cos(math.pi * 12 / 24))
    assert abs(float(s(12)) - mid_up) < 1e-5


def _toy_params():
    return {"backbone": {"kernel": jnp.ones((4, 3)), "bias": jnp.ones(3)},
            "head": {"kernel": jnp.ones((3, 2)), "norm": {"scale": jnp.ones((2, 2))}},
            "frozen": {"kernel": jnp.ones((2, 2))}}


def _labels(params):
    return {k: jax.tree_util.tree_map(lambda _: k, v) for k, v in params.items()}


def test_weight_decay_mask():
    m = weight_decay_mask(_toy_params(), ("bias", "scale"))
    assert m["backbone"]["kernel"] and not m["backbone"]["bias"]
    assert not m["head"]["norm"]["scale"] and m["head"]["kernel"]


def test_groups_learning_rates_and_frozen():
    params = _toy_params()
    c = _opt(schedule="constant", learning_rate=1e-2, weight_decay=0.0, grad_clip_norm=0.0,
             frozen_groups=("frozen",))
    c.optimizer.group_learning_rates.backbone = 1e-4
    tx, _ = make_optimizer(c, params, _labels(params))
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    updates, state = tx.update(grads, tx.init(params), params)
    # Adam's first step moves every coordinate by lr * sign(g) (bias-corrected m/sqrt(v) = 1).
    np.testing.assert_allclose(updates["backbone"]["kernel"], -1e-4, rtol=1e-3)
    np.testing.assert_allclose(updates["head"]["kernel"], -1e-2, rtol=1e-3)
    np.testing.assert_array_equal(updates["frozen"]["kernel"], 0.0)
    moments = [x for x in jax.tree_util.tree_leaves(state) if getattr(x, "shape", None) == (2, 2)]
    assert len(moments) == 2 * 1 + 0, "frozen parameters must carry no Adam moments"  # head/norm only


def test_weight_decay_applies_only_where_masked():
    params = _toy_params()
    c = _opt(schedule="constant", learning_rate=1e-2, weight_decay=0.5, grad_clip_norm=0.0,
             frozen_groups=(), no_weight_decay=("bias",))
    tx, _ = make_optimizer(c, params, jax.tree_util.tree_map(lambda _: "all", params))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    updates, _ = tx.update(zeros, tx.init(params), params)
    np.testing.assert_allclose(updates["backbone"]["kernel"], -1e-2 * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(updates["backbone"]["bias"], 0.0)


def test_clipping_is_global_and_ignores_frozen():
    params = _toy_params()
    c = _opt(schedule="constant", learning_rate=1.0, weight_decay=0.0, grad_clip_norm=1.0,
             frozen_groups=("frozen",))
    tx, _ = make_optimizer(c, params, _labels(params))
    grads = jax.tree_util.tree_map(jnp.zeros_like, params)
    grads["frozen"]["kernel"] = jnp.full((2, 2), 1e6)  # would dominate the norm if counted
    grads["head"]["kernel"] = jnp.full((3, 2), 0.1)
    clip = optax.clip_by_global_norm(1.0)
    # Reference: clipping of the trainable gradients alone leaves this small gradient unchanged.
    ref, _ = clip.update({"g": grads["head"]["kernel"]}, clip.init(None))
    np.testing.assert_allclose(ref["g"], 0.1)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["head"]["kernel"], -1.0, rtol=1e-3)  # Adam: lr * sign


def test_clipping_reuses_the_steps_norm_only_without_frozen_groups():
    """optimizer.clip_by_global_norm against optax's: the norm the train step passes is used (a wrong
    one shows it), except with frozen groups, whose gradients the step's norm includes."""
    from locojax.train.optimizer import clip_by_global_norm
    from locojax.train.state import TrainState
    from locojax.train.step import apply_gradients, global_norm

    grads = {"a": jnp.full((3, 2), 2.0), "b": jnp.arange(4.0)}
    want, _ = optax.clip_by_global_norm(1.0).update(grads, optax.EmptyState())
    got, _ = clip_by_global_norm(1.0).update(grads, optax.EmptyState(), global_norm=global_norm(grads))
    for k in grads:
        np.testing.assert_array_equal(got[k], want[k])
    given, _ = clip_by_global_norm(1.0).update(grads, optax.EmptyState(), global_norm=jnp.float32(100.0))
    np.testing.assert_allclose(given["a"], 2.0 / 100.0, rtol=1e-6)  # the given norm was used
    ignored, _ = clip_by_global_norm(1.0, reuse_norm=False).update(grads, optax.EmptyState(),
                                                                    global_norm=jnp.float32(100.0))
    for k in grads:
        np.testing.assert_array_equal(ignored[k], want[k])

    # Through the train step's optimizer half, frozen gradients still stay out of the clipping.
    params = _toy_params()
    c = _opt(schedule="constant", learning_rate=1.0, weight_decay=0.0, grad_clip_norm=1.0,
             frozen_groups=("frozen",))
    tx, _ = make_optimizer(c, params, _labels(params))
    g = jax.tree_util.tree_map(jnp.zeros_like, params)
    g["frozen"]["kernel"] = jnp.full((2, 2), 1e6)
    g["head"]["kernel"] = jnp.full((3, 2), 0.1)
    state = TrainState(step=jnp.int32(0), params=params, opt_state=tx.init(params), rng=jax.random.PRNGKey(0),
                       num_nonfinite=jnp.int32(0), consecutive_nonfinite=jnp.int32(0))
    new, norm, finite = apply_gradients(tx, state, jnp.float32(0.0), g)
    assert bool(finite) and float(norm) > 1e6
    np.testing.assert_allclose(new.params["head"]["kernel"] - params["head"]["kernel"], -1.0, rtol=1e-3)
    np.testing.assert_array_equal(new.params["frozen"]["kernel"], params["frozen"]["kernel"])
