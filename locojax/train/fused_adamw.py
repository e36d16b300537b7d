"""The optimizer of `locojax.train.optimizer.make_optimizer` computed leaf by leaf in one expression.

optax's chain (masked set_to_zero -> clip_by_global_norm -> multi_transform of per-group AdamW:
scale_by_adam -> add_decayed_weights -> scale_by_learning_rate) materialises stages that several
consumers share (the clipped gradient `g / norm * max_norm` feeds both moments), so XLA:CPU compiles
~5.5 kernels per parameter leaf in the train step's optimizer half (docs/performance.md, "optimizer
kernels"). Here each output (update, mu, nu) of a leaf is one elementwise expression of (g, p, mu, nu)
and scalars, with every expensive op (divide, sqrt) used by one output only, so XLA can fuse each
output into one kernel.

The state is the optax chain's own (same pytree, same node types: `ScaleByAdamState`,
`InjectStatefulHyperparamsState`, `MultiTransformState`, ...), so checkpoints written before restore
unchanged and `optax.tree` utilities keep working. Its scalar bookkeeping (counts, injected
hyperparameters) comes from running the optax chain's `update` itself and keeping only those scalars:
the chain's per-leaf work is then unused and removed by XLA's dead-code elimination.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from locojax.train.grad_norm import global_norm as bucketed_global_norm

Schedule = Callable[[Any], Any]


def _is_adam_state(x) -> bool:
    return isinstance(x, optax.ScaleByAdamState)


def _is_injected(x) -> bool:
    return isinstance(x, optax.InjectStatefulHyperparamsState)


def _is_masked(x) -> bool:
    return isinstance(x, optax.MaskedNode)


def _adam_state_of(group_state) -> optax.ScaleByAdamState:
    found = [s for s in jax.tree_util.tree_leaves(group_state, is_leaf=_is_adam_state) if _is_adam_state(s)]
    if len(found) != 1:
        raise ValueError(f"expected one optax ScaleByAdamState in a group's optimizer state, found {len(found)}")
    return found[0]


def _replace_adam_state(group_state, new_adam: optax.ScaleByAdamState):
    return jax.tree_util.tree_map(lambda s: new_adam if _is_adam_state(s) else s, group_state,
                                  is_leaf=_is_adam_state)


def fused_adamw(
    reference: optax.GradientTransformation,
    *,
    labels,
    group_schedules: Mapping[str, Schedule],
    group_b1: Mapping[str, Any],
    frozen_groups,
    decay_mask,
    b2: float,
    eps: float,
    weight_decay: float,
    grad_clip_norm: float,
    multi_group: bool,
    norm_concat_below: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    """AdamW with per-group schedules, frozen groups, decay mask and global-norm clipping, numerically
    the optax chain `reference` that `make_optimizer` builds (same state; updates equal to float32
    rounding), with one fused expression per output and leaf.

    Args:
      reference: the optax chain (its `init` is this transformation's `init`; its `update` supplies
        the new counts and injected hyperparameters).
      labels: pytree like params of group names.
      group_schedules: group -> step -> learning rate (trainable groups).
      group_b1: group -> float b1 or step -> b1 (one-cycle momentum cycling).
      frozen_groups: groups whose updates are zero and which carry no moments.
      decay_mask: pytree like params of bools, True where decoupled weight decay applies.
      b2, eps, weight_decay: AdamW's (eps_root is 0, as in optax.adamw's default).
      grad_clip_norm: clip on the global norm of the trainable gradients; <= 0 disables.
      multi_group: whether `reference` ends in optax.multi_transform (else one trainable group).
      norm_concat_below: `locojax.train.grad_norm.concat_limit(config.sharding)`.

    `update(grads, state, params, global_norm=None)`: `global_norm`, the norm of all gradients, is
    used for clipping when no group is frozen; otherwise (or when omitted) the norm of the trainable
    gradients is reduced here (`locojax.train.grad_norm`, a few kernels).
    """
    frozen = frozenset(frozen_groups)
    b2 = float(b2)
    eps = float(eps)
    weight_decay = float(weight_decay)
    max_norm = float(grad_clip_norm)

    def update_fn(grads, state, params=None, *, global_norm=None, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("fused_adamw needs params (AdamW's weight decay)")
        # Counts, injected hyperparameters: exactly optax's; its per-leaf outputs are never used.
        _, ref_state = reference.update(grads, state, params)

        leaves_p, treedef = jax.tree_util.tree_flatten(params)
        leaves_g = treedef.flatten_up_to(grads)
        leaves_label = treedef.flatten_up_to(labels)
        leaves_decay = treedef.flatten_up_to(decay_mask)
        trainable = [lab not in frozen for lab in leaves_label]

        scale = None
        if max_norm > 0:
            if global_norm is not None and all(trainable):
                norm = global_norm
            else:
                # Frozen gradients stay out of the clipping norm (torch clip_grad_norm_ over the
                # trainable parameters in the papers' code).
                norm = bucketed_global_norm([g for g, t in zip(leaves_g, trainable) if t],
                                            concat_below=norm_concat_below)
            # optax.clip_by_global_norm: t where norm < max_norm, else t / norm * max_norm; one scalar
            # factor keeps the divide out of the per-leaf expressions.
            scale = jnp.where(norm < max_norm, jnp.float32(1.0), max_norm / norm)

        group_state_of = {}
        last = ref_state[-1]
        old_last = state[-1]
        if multi_group:
            for name in group_schedules:
                group_state_of[name] = (_adam_state_of(old_last.inner_states[name]), last.inner_states[name])
        else:
            (name,) = tuple(group_schedules)
            group_state_of[name] = (_adam_state_of(old_last), last)

        leaves_u = [None] * len(leaves_p)
        new_adam = {}
        for name, (old_adam, new_group_state) in group_state_of.items():
            mu_leaves = jax.tree_util.tree_leaves(old_adam.mu, is_leaf=_is_masked)
            nu_leaves = jax.tree_util.tree_leaves(old_adam.nu, is_leaf=_is_masked)
            if len(mu_leaves) != len(leaves_p):
                raise ValueError(f"optimizer state of group {name!r} does not match the parameters "
                                 f"({len(mu_leaves)} moment leaves, {len(leaves_p)} parameters)")
            count = old_adam.count
            count_inc = optax.safe_increment(count)
            injected = [s for s in jax.tree_util.tree_leaves(new_group_state, is_leaf=_is_injected)
                        if _is_injected(s)]
            if injected:
                # optax.inject_hyperparams: the values this step used, as float32 arrays.
                hp = injected[0].hyperparams
                lr, b1, b2_g, eps_g, wd = (hp["learning_rate"], hp["b1"], hp["b2"], hp["eps"],
                                           hp["weight_decay"])
            else:
                lr, b1, b2_g, eps_g, wd = group_schedules[name](count), group_b1[name], b2, eps, weight_decay
            bc1 = 1 - b1 ** count_inc
            bc2 = 1 - b2_g ** count_inc
            new_mu, new_nu = [], []
            for i, (g, p, mu, nu) in enumerate(zip(leaves_g, leaves_p, mu_leaves, nu_leaves)):
                if _is_masked(mu):
                    new_mu.append(mu)
                    new_nu.append(nu)
                    continue
                dtype = g.dtype
                if scale is not None:
                    g = g * scale.astype(dtype)
                # optax.scale_by_adam (update_moment, bias_correction), add_decayed_weights,
                # scale_by_learning_rate, in its order of operations.
                m = (1 - b1) * g + b1 * mu
                v = (1 - b2_g) * (g * g) + b2_g * nu
                u = (m / bc1.astype(m.dtype)) / (jnp.sqrt(v / bc2.astype(v.dtype)) + eps_g)
                if leaves_decay[i] and (injected or weight_decay):
                    u = u + wd * p
                leaves_u[i] = jnp.asarray(-lr, dtype) * u
                new_mu.append(m.astype(mu.dtype))
                new_nu.append(v.astype(nu.dtype))
            mu_tree = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(old_adam.mu, is_leaf=_is_masked),
                                                   new_mu)
            nu_tree = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(old_adam.nu, is_leaf=_is_masked),
                                                   new_nu)
            new_adam[name] = optax.ScaleByAdamState(count=count_inc, mu=mu_tree, nu=nu_tree)

        for i, u in enumerate(leaves_u):
            if u is None:
                if trainable[i]:
                    raise ValueError(f"parameter leaf {i} (group {leaves_label[i]!r}) has no Adam moments")
                leaves_u[i] = jnp.zeros_like(leaves_g[i])  # frozen: optax.set_to_zero
        updates = jax.tree_util.tree_unflatten(treedef, leaves_u)

        if multi_group:
            inner = dict(last.inner_states)
            for name, adam in new_adam.items():
                inner[name] = _replace_adam_state(inner[name], adam)
            last = last._replace(inner_states=inner)
        else:
            last = _replace_adam_state(last, new_adam[name])
        return updates, (*ref_state[:-1], last)

    # Jitted: called eagerly (tests, notebooks) it is one dispatch instead of thousands; inside the
    # train step's jit it is inlined.
    return optax.GradientTransformationExtraArgs(reference.init, jax.jit(update_fn))
