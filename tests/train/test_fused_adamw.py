"""The fused AdamW (`make_optimizer`'s default) against optax's chain (`fused=False`) through the train
step's optimizer half: groups with their own learning rates, a frozen group, the decay mask, clipping
that does and does not trigger, one-cycle with and without beta1 cycling, and a non-finite step. The
bucketed gradient norm against numpy in float64."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs.common import base_config
from locojax.train.grad_norm import global_norm, sum_of_squares
from locojax.train.optimizer import make_optimizer
from locojax.train.state import TrainState
from locojax.train.step import apply_gradients


def _params():
    rng = np.random.RandomState(0)
    shapes = {"backbone": {"kernel": (5, 4), "bias": (4,)},
              "head": {"kernel": (4, 3), "norm": {"scale": (3,)}, "embed": (2, 3)},
              "frozen": {"kernel": (3, 3)}}
    return jax.tree_util.tree_map(lambda s: jnp.asarray(rng.randn(*s), jnp.float32), shapes,
                                  is_leaf=lambda s: isinstance(s, tuple))


def _labels(params):
    return {k: jax.tree_util.tree_map(lambda _: k, v) for k, v in params.items()}


def _run(tx, params, grads_per_step, loss_per_step):
    state = TrainState(step=jnp.int32(0), params=params, opt_state=tx.init(params), rng=jax.random.PRNGKey(0),
                       num_nonfinite=jnp.int32(0), consecutive_nonfinite=jnp.int32(0))
    step = jax.jit(lambda s, loss, g: apply_gradients(tx, s, loss, g)[0])
    history = []
    for loss, grads in zip(loss_per_step, grads_per_step):
        state = step(state, jnp.float32(loss), grads)
        history.append(state)
    return history


@pytest.mark.parametrize("cycle_momentum", [False, True])
def test_fused_adamw_matches_optax_chain(cycle_momentum):
    c = base_config()
    c.total_steps = 8
    oc = c.optimizer
    oc.schedule, oc.one_cycle_pct_start, oc.one_cycle_cycle_momentum = "one_cycle", 0.3, cycle_momentum
    oc.learning_rate, oc.weight_decay, oc.grad_clip_norm = 1e-2, 0.1, 3.0
    oc.no_weight_decay = ("bias", "embed")
    oc.group_learning_rates.backbone = 1e-3
    oc.frozen_groups = ("frozen",)
    params = _params()
    labels = _labels(params)
    fused, _ = make_optimizer(c, params, labels)
    chain, _ = make_optimizer(c, params, labels, fused=False)
    assert fused.update is not chain.update

    rng = np.random.RandomState(1)
    scales = [0.1, 5.0, 0.2, 1.0, 3.0, 0.5]  # global norms ~0.5 to ~25: clipping off and on
    grads_per_step = [jax.tree_util.tree_map(lambda p, s=s: jnp.asarray(s * rng.randn(*p.shape), jnp.float32), params)
                      for s in scales]
    grads_per_step[2]["frozen"]["kernel"] = grads_per_step[2]["frozen"]["kernel"] * 1e4  # must not clip the rest
    grads_per_step[3]["head"]["kernel"] = grads_per_step[3]["head"]["kernel"].at[1, 2].set(jnp.nan)
    losses = [1.0, 1.0, 1.0, 1.0, np.inf, 1.0]
    got = _run(fused, params, grads_per_step, losses)
    want = _run(chain, params, grads_per_step, losses)

    for t, (g, w) in enumerate(zip(got, want)):
        # Same optax state pytree (node types included): checkpoints are interchangeable.
        assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(w), t
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(w)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-7, err_msg=f"step {t}")
    np.testing.assert_array_equal(got[-1].params["frozen"]["kernel"], params["frozen"]["kernel"])
    # The two non-finite steps (NaN gradient, infinite loss) kept params and moments and were counted.
    for t in (3, 4):
        for a, b in zip(jax.tree_util.tree_leaves((got[t].params, got[t].opt_state)),
                        jax.tree_util.tree_leaves((got[2].params, got[2].opt_state))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert [int(s.num_nonfinite) for s in got] == [0, 0, 0, 1, 2, 2]
    assert int(got[-1].step) == 6
    moved = np.abs(np.asarray(got[-1].params["head"]["kernel"] - got[2].params["head"]["kernel"]))
    assert moved.min() > 0  # the step after the non-finite ones did update


def test_fused_adamw_single_group_without_clip():
    c = base_config()
    c.total_steps = 10
    c.optimizer.grad_clip_norm = 0.0
    c.optimizer.warmup_steps = 3
    params = {"a": jnp.ones((3, 2)), "b": jnp.arange(4.0)}
    labels = jax.tree_util.tree_map(lambda _: "default", params)
    fused, _ = make_optimizer(c, params, labels)
    chain, _ = make_optimizer(c, params, labels, fused=False)
    grads = [jax.tree_util.tree_map(lambda p, k=k: jnp.cos(p + k), params) for k in range(4)]
    for g, w in zip(_run(fused, params, grads, [0.0] * 4), _run(chain, params, grads, [0.0] * 4)):
        assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(w)
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(w)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-8)


def test_bucketed_norm_matches_float64():
    rng = np.random.RandomState(2)
    tree = {"big": rng.randn(70).astype(np.float32), "s": [rng.randn(3, 4).astype(np.float32) for _ in range(9)],
            "scalar": np.float32(3.0)}
    want = sum(np.sum(np.asarray(x, np.float64) ** 2) for x in jax.tree_util.tree_leaves(tree))
    for bucket in (1, 16, 1 << 24):  # a leaf per bucket; several, with a leaf larger than one; all in one
        np.testing.assert_allclose(float(jax.jit(lambda t, b=bucket: sum_of_squares(t, b))(tree)), want, rtol=1e-6)
    np.testing.assert_allclose(float(jax.jit(lambda t: global_norm(t, 16))(tree)), np.sqrt(want), rtol=1e-6)
    # "fsdp": leaves of 12 or more elements reduced alone, the scalar concatenated.
    np.testing.assert_allclose(float(jax.jit(lambda t: sum_of_squares(t, 16, concat_below=12))(tree)), want,
                               rtol=1e-6)
    assert float(sum_of_squares({})) == 0.0
    assert not np.isfinite(float(global_norm({"a": jnp.array([1.0, jnp.nan])})))
