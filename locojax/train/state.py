"""TrainState and its abstract form.

The abstract state (`jax.eval_shape` of the init function) is computed once and serves three jobs,
MaxText style: the shardings are derived from it, the real state is created by jitting the init
function with those out_shardings (parameters are born sharded, never gathered on one device), and
an orbax restore uses it as the target so restored arrays land directly in the same shardings.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class TrainState:
    """Everything that changes during training (all leaves are arrays; checkpointed as one pytree).

    Attributes:
      step: [] int32, number of train steps taken (skipped non-finite steps included).
      params: model parameters (float32).
      opt_state: optax state.
      rng: [2] uint32 raw PRNG key; step s uses fold_in(rng, s), so resuming needs no RNG replay.
      num_nonfinite: [] int32, total skipped (non-finite) steps.
      consecutive_nonfinite: [] int32, skipped steps since the last applied update.
    """

    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array
    num_nonfinite: jax.Array
    consecutive_nonfinite: jax.Array


def make_init_fn(model, tx) -> Callable:
    """(rng [2] uint32, example batch) -> TrainState; jittable, used under eval_shape too."""

    def init(rng, batch):
        init_rng, train_rng = jax.random.split(rng)
        return state_from_params(model.init(init_rng, batch), train_rng, tx)

    return init


def state_from_params(params, train_rng, tx) -> TrainState:
    """The TrainState at step 0 around `params` (what the init function returns); jittable."""
    params = strong_types(params)
    state = TrainState(
        step=jnp.zeros((), jnp.int32),
        params=params,
        opt_state=tx.init(params),
        rng=train_rng,
        num_nonfinite=jnp.zeros((), jnp.int32),
        consecutive_nonfinite=jnp.zeros((), jnp.int32),
    )
    return strong_types(state)


def strong_types(tree):
    """Drop weak types (e.g. from `jnp.full(shape, python_float)`): a weakly typed initial leaf
    becomes strongly typed after the first update, which would recompile every jitted function
    that takes the state."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=x.dtype), tree)


def abstract_params(model, rng, batch):
    """Parameter shapes without allocating them (needed to build the optimizer's groups)."""
    return jax.eval_shape(model.init, rng, batch)


def abstract_state(init_fn, rng, batch):
    return jax.eval_shape(init_fn, rng, batch)


def abstract_state_from_params(params_shape, rng, tx):
    """`abstract_state` from the abstract params (`abstract_params`) without tracing the model's init
    again (seconds for the larger families, on every run, resume, evaluate and render)."""
    return jax.eval_shape(lambda r, p: state_from_params(p, jax.random.split(r)[1], tx), rng, params_shape)


def create_state(init_fn, rng, batch, shardings):
    """The real initial state, created directly in `shardings`."""
    return jax.jit(init_fn, out_shardings=shardings)(rng, batch)


def count_params(params, labels=None, frozen_groups=(), frozen: bool = False) -> int:
    """Number of trainable (frozen=False) or frozen (frozen=True) parameters; all when no labels."""
    if labels is None:
        return int(sum(x.size for x in jax.tree_util.tree_leaves(params))) if not frozen else 0
    sizes = jax.tree_util.tree_leaves(jax.tree_util.tree_map(
        lambda x, lab: x.size if ((lab in frozen_groups) == frozen) else 0, params, labels))
    return int(sum(sizes))
