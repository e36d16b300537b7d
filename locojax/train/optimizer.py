"""optax AdamW with the papers' schedules, global-norm clipping, parameter groups and decay masks.

Groups come from the model: `model.param_labels(params)` returns a pytree like `params` whose leaves
are group names. `config.optimizer.group_learning_rates[name]` sets that group's peak learning rate
(LoCoSplat: backbone 2e-6), groups in `config.optimizer.frozen_groups` are never updated and carry no
optimizer moments (LoCoSplat's DepthAnything), all other groups use `config.optimizer.learning_rate`.
Every group follows the same schedule shape, scaled to its own peak.

The optimizer is built as an optax chain; `make_optimizer` returns it wrapped in
`locojax.train.fused_adamw.fused_adamw` (same state and arithmetic, one XLA kernel per output and leaf).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from locojax.train.fused_adamw import fused_adamw
from locojax.train.grad_norm import concat_limit

Schedule = Callable[[Any], Any]


def make_schedule(opt_config, total_steps: int, peak_lr: float) -> Schedule:
    """step -> learning rate.

    * "warmup_cosine": linear peak * warmup_init_fraction -> peak over `warmup_steps`, then cosine to
      peak * final_lr_fraction at `total_steps` (GlobalSplat: torch LinearLR(start_factor=1e-3) then
      CosineAnnealingLR; LocusGS/TokenGS from 0).
    * "one_cycle": PyTorch OneCycleLR's cosine form (LoCoSplat): peak/div_factor -> peak over
      pct_start of the run, then down to peak/div_factor/final_div_factor.
    * "constant".
    """
    name = opt_config.schedule
    total_steps = max(int(total_steps), 1)
    if name == "warmup_cosine":
        warmup = min(int(opt_config.warmup_steps), total_steps - 1) if total_steps > 1 else 0
        return optax.warmup_cosine_decay_schedule(
            init_value=peak_lr * float(opt_config.get("warmup_init_fraction", 0.0)),
            peak_value=peak_lr,
            warmup_steps=warmup,
            decay_steps=total_steps,  # optax counts decay_steps including the warm-up
            end_value=peak_lr * float(opt_config.final_lr_fraction),
        )
    if name == "one_cycle":
        initial = peak_lr / float(opt_config.one_cycle_div_factor)
        return _torch_one_cycle(opt_config, total_steps, initial, peak_lr,
                                initial / float(opt_config.one_cycle_final_div_factor))
    if name == "constant":
        return optax.constant_schedule(peak_lr)
    raise ValueError(
        f"config.optimizer.schedule={name!r}: expected 'warmup_cosine', 'one_cycle' or 'constant'"
    )


def _torch_one_cycle(opt_config, total_steps: int, start: float, middle: float, end: float) -> Schedule:
    """PyTorch OneCycleLR's two cosine phases (`_schedule_phases`, anneal_strategy="cos"): start ->
    middle up to step pct_start * total - 1, then middle -> end at step total - 1. (optax's
    cosine_onecycle_schedule turns one step later, at pct_start * total.)"""
    total_steps = max(int(total_steps), 2)
    rise = max(float(opt_config.one_cycle_pct_start) * total_steps - 1.0, 1.0)

    def cos_anneal(a, b, pct):
        w = 0.5 * (1.0 + jnp.cos(jnp.pi * pct))  # written as a blend so each phase starts exactly at `a`
        return a * w + b * (1.0 - w)

    def schedule(step):
        step = jnp.asarray(step, jnp.float32)
        up = cos_anneal(start, middle, jnp.clip(step / rise, 0.0, 1.0))
        down = cos_anneal(middle, end, jnp.clip((step - rise) / max(total_steps - 1.0 - rise, 1.0), 0.0, 1.0))
        return jnp.where(step <= rise, up, down)

    return schedule


def one_cycle_beta1(opt_config, total_steps: int) -> Schedule:
    """PyTorch OneCycleLR's momentum cycling (cycle_momentum=True, cosine): beta1 goes
    max -> base over the rising phase, then base -> max (TokenGS/LocusGS: 0.95 -> 0.85 -> 0.95)."""
    hi, lo = float(opt_config.one_cycle_max_momentum), float(opt_config.one_cycle_base_momentum)
    return _torch_one_cycle(opt_config, total_steps, hi, lo, hi)


def _path_str(path) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path)


def weight_decay_mask(params, no_decay_substrings) -> Any:
    """True where AdamW's decoupled weight decay applies: matrices / kernels (ndim >= 2) whose path
    contains none of `no_decay_substrings` (biases, norm scales, embeddings, learned tokens)."""
    subs = tuple(s.lower() for s in no_decay_substrings)

    def decays(path, leaf):
        p = _path_str(path).lower()
        return bool(np.ndim(leaf) >= 2 and not any(s in p for s in subs))

    return jax.tree_util.tree_map_with_path(decays, params)


def clip_by_global_norm(max_norm: float, reuse_norm: bool = True) -> optax.GradientTransformationExtraArgs:
    """optax.clip_by_global_norm (updates scaled by max_norm / norm where norm > max_norm), taking the
    norm from `tx.update(..., global_norm=NORM)` when given and `reuse_norm`.

    The train step already reduces the gradients to their global norm (its finiteness test and log);
    a second reduction here is one more XLA kernel per parameter leaf (~1,200 for the ~830 leaves of
    `locosplat_tiny`; docs/performance.md). `reuse_norm=False` (frozen groups: their gradients are in
    the step's norm but not in the clipping's) always reduces the updates it is given.
    Stateless: its state is optax's `ClipByGlobalNormState` (an empty node), as before.
    """

    def update_fn(updates, state, params=None, *, global_norm=None, **extra_args):
        del params, extra_args
        g_norm = optax.tree.norm(updates) if global_norm is None or not reuse_norm else global_norm
        trigger = g_norm < max_norm
        updates = jax.tree_util.tree_map(
            lambda t: jax.lax.select(trigger, t, (t / g_norm.astype(t.dtype)) * max_norm), updates)
        return updates, state

    return optax.GradientTransformationExtraArgs(optax.init_empty_state, update_fn)


def group_names(labels) -> list[str]:
    return sorted(set(jax.tree_util.tree_leaves(labels)))


def make_optimizer(config, params, labels, fused: bool = True) -> tuple[optax.GradientTransformation, Schedule]:
    """The optimizer for `params` (concrete or abstract) and the default group's schedule (for
    logging `lr`).

    Args:
      config: the full run config (reads `optimizer`, `total_steps`).
      params: the parameter pytree (shapes only are used).
      labels: pytree like params of group-name strings, from `model.param_labels`.
      fused: return `locojax.train.fused_adamw.fused_adamw` over the optax chain (same state and
        arithmetic, about half the XLA kernels per parameter leaf); False returns the optax chain.
    """
    oc = config.optimizer
    group_lrs = dict(oc.group_learning_rates)
    frozen = set(oc.frozen_groups)
    names = group_names(labels)
    unknown = set(group_lrs) - set(names)
    if unknown:
        raise ValueError(
            f"config.optimizer.group_learning_rates names groups {sorted(unknown)} that the model's "
            f"param_labels does not produce (groups: {names})"
        )
    no_decay = tuple(oc.no_weight_decay)
    # A callable mask: inside multi_transform each group sees the tree with other groups' leaves
    # replaced by empty MaskedNodes, so the mask must be computed on the tree it is given.
    mask = lambda p: weight_decay_mask(p, no_decay)  # noqa: E731
    default_schedule = make_schedule(oc, config.total_steps, float(oc.learning_rate))
    transforms, schedules, betas1 = {}, {}, {}
    for name in names:
        if name in frozen:
            transforms[name] = optax.set_to_zero()
            continue
        schedule = make_schedule(oc, config.total_steps, float(group_lrs.get(name, oc.learning_rate)))
        b1 = float(oc.b1)
        adamw = optax.adamw
        if oc.get("one_cycle_cycle_momentum", False):
            if oc.schedule != "one_cycle":
                raise ValueError("config.optimizer.one_cycle_cycle_momentum=True needs schedule='one_cycle'")
            b1 = one_cycle_beta1(oc, config.total_steps)
            adamw = optax.inject_hyperparams(optax.adamw, static_args=("mask",))
        schedules[name], betas1[name] = schedule, b1
        transforms[name] = adamw(
            learning_rate=schedule,
            b1=b1,
            b2=float(oc.b2),
            eps=float(oc.eps),
            weight_decay=float(oc.weight_decay),
            mask=mask,
        )
    chain = []
    frozen_names = [n for n in names if n in frozen]
    if frozen_names:
        # Frozen gradients must not enter the clipping norm.
        frozen_mask = jax.tree_util.tree_map(lambda lab: lab in frozen, labels)
        chain.append(optax.masked(optax.set_to_zero(), frozen_mask))
    if float(oc.grad_clip_norm) > 0:
        # Clip on the global norm over all trainable groups, before the per-group split, as
        # torch.nn.utils.clip_grad_norm_ does in the papers' code.
        chain.append(clip_by_global_norm(float(oc.grad_clip_norm), reuse_norm=not frozen_names))
    multi_group = not (len(names) == 1 and names[0] not in frozen)
    if multi_group:
        chain.append(optax.multi_transform(transforms, labels))
    else:
        chain.append(transforms[names[0]])
    reference = optax.chain(*chain)
    if not fused:
        return reference, default_schedule
    return fused_adamw(
        reference,
        labels=labels,
        group_schedules=schedules,
        group_b1=betas1,
        frozen_groups=frozen_names,
        decay_mask=weight_decay_mask(params, no_decay),
        b2=float(oc.b2),
        eps=float(oc.eps),
        weight_decay=float(oc.weight_decay),
        grad_clip_norm=float(oc.grad_clip_norm),
        multi_group=multi_group,
        norm_concat_below=concat_limit(config.get("sharding", "replicated")),
    ), default_schedule
