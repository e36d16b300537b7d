"""The coarse-to-fine capacity curriculum (paper sec. 3.4, appendix eqs. 26-35).

Each latent token predicts M candidates; at stage s they form G = 2^s consecutive groups of
b = M / G, merged with gate weights w = softmax(l / tau) inside each group (eqs. 26-28). Rules
(official `TokenCoarseToFine3DGS`):

* positions, 6D rotations, SH: weighted mean (eq. 28);
* log-scales: weighted mean + log(b) / 3 (eq. 30: the merged Gaussian keeps the group's volume);
* opacity: log(1 - alpha_parent) = sum_i w_i log(1 - alpha_i) (eqs. 32-33);
* transition (eq. 29): z = (1 - lambda) split(z^(s-1)) + lambda z^(s), where split duplicates each
  parent into two children with log s_child = log s_parent - log(2) / 3 (eq. 31) and
  log u_child = log u_parent / 2 (eq. 34); positions, rotations, SH are plainly duplicated.

Schedule (eq. 35 table): stage boundaries (10k, 20k, 50k) clipped to the final stage, each followed
by a linear ramp of lambda from 0 to 1 over 2k steps; `stage_and_mix` computes it from a traced
step, so a stage change never recompiles.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp


def gate_weights(gate_logits, groups: int, tau: float = 1.0):
    """[B, P, M, 1] logits -> [B, P, G, b, 1] softmax weights within each group (eq. 27)."""
    b, p, m, _ = gate_logits.shape
    if m % groups:
        raise ValueError(f"{m} candidates cannot form {groups} equal groups")
    return jax.nn.softmax(gate_logits.reshape(b, p, groups, m // groups, 1) / tau, axis=3)


def weighted_reduce(x, weights):
    """x [B, P, M, D], weights [B, P, G, b, 1] -> [B, P, G, D] (eq. 28)."""
    b, p, m, d = x.shape
    g, bs = weights.shape[2], weights.shape[3]
    return jnp.sum(weights * x.reshape(b, p, g, bs, d), axis=3)


def merge_log_scales(log_s, weights):
    """Eq. 30: weighted mean of log-scales plus log(b) / 3 per axis (no correction when b = 1)."""
    bs = weights.shape[3]
    out = weighted_reduce(log_s, weights)
    return out + math.log(bs) / 3.0 if bs > 1 else out


def log1mexp(x):
    """log(1 - exp(x)) for x <= 0, stable on both sides of -log 2."""
    return jnp.where(x > -math.log(2.0), jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


def merge_opacity_logits(op_logits, weights, eps: float = 1e-12):
    """Eqs. 32-33 on logits: log u_i = log sigmoid(-o_i); log u_parent = sum w_i log u_i; back to a
    logit log(1 - u) - log(u). [B, P, M, 1] -> [B, P, G, 1]."""
    log_u = jax.nn.log_sigmoid(-op_logits)
    log_u_parent = jnp.minimum(weighted_reduce(log_u, weights), -eps)
    return log1mexp(log_u_parent) - log_u_parent


def split_plain(x):
    """Duplicate each parent into two children along the group axis: [B, P, G, D] -> [B, P, 2G, D]."""
    return jnp.repeat(x, 2, axis=2)


def split_log_scales(log_s):
    """Eq. 31: children at log s_parent - log(2) / 3 (two children keep the parent's volume)."""
    return split_plain(log_s) - math.log(2.0) / 3.0


def split_opacity_logits(op_logits):
    """Eq. 34: log u_child = log u_parent / 2 (two children composite to the parent's alpha)."""
    log_u_child = 0.5 * jax.nn.log_sigmoid(-op_logits)
    return split_plain(log1mexp(log_u_child) - log_u_child)


def stage_and_mix(step, boundaries: Sequence[int], ramp_steps: int, final_stage: int):
    """Traced step -> (stage int32, lambda float32), the official `_stage_schedule`.

    stage = number of boundaries (clipped to `final_stage` of them) that `step` has reached;
    lambda = clip((step - last boundary) / ramp_steps, 0, 1) after a boundary, 1 before the first.
    """
    bounds = tuple(int(b) for b in boundaries)[: int(final_stage)]
    step = jnp.asarray(step, jnp.int32)
    if not bounds:
        return jnp.zeros((), jnp.int32), jnp.ones((), jnp.float32)
    b_arr = jnp.asarray(bounds, jnp.int32)
    stage = jnp.sum(step >= b_arr).astype(jnp.int32)
    last = jnp.where(stage > 0, b_arr[jnp.maximum(stage - 1, 0)], 0)
    if ramp_steps > 0:
        ramp = jnp.clip((step - last).astype(jnp.float32) / float(ramp_steps), 0.0, 1.0)
        mix = jnp.where(stage > 0, ramp, 1.0)
    else:
        mix = jnp.ones((), jnp.float32)
    return stage, mix.astype(jnp.float32)
