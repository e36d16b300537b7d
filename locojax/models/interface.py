"""The contract between a model family and the shared trainer / evaluator.

A family (GlobalSplat, LoCoSplat, LocusGS/TokenGS) supplies one object implementing
`GaussianModel`; `locojax.train` never imports a family directly, it receives the object from
`locojax.models.registry.build_model(config)`. Everything here must be jittable: `step` is a traced
int32 scalar (curriculum stages change without recompiling), shapes depend only on the config.

The trainer's step is:

    gaussians, aux = model.predict(params, batch.context, step=step, train=True, rng=rng)
    renders = locojax.render.rasterize_batch(gaussians, cameras_from_views(batch.target), ...)
    terms = model.loss_terms(params, batch, gaussians, aux, renders, step=step, rng=rng)
    loss = sum(terms[k].weight * terms[k].value)
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Protocol

import jax

from locojax.types import Batch, Gaussians, RenderOutput, Views

Params = Any  # a pytree of arrays


class LossTerm(NamedTuple):
    """One weighted term of an objective; the trainer logs `value` and sums `weight * value`."""

    weight: float | jax.Array
    value: jax.Array


class GaussianModel(Protocol):
    """What the trainer and evaluator need of a model family."""

    name: str
    num_gaussians: int  # Gaussians per scene at full capacity (static)
    sh_degree: int

    def init(self, rng: jax.Array, batch: Batch) -> Params:
        """Initial parameters (used under `jax.eval_shape` for abstract state too)."""

    def predict(
        self, params: Params, context: Views, *, step: jax.Array, train: bool, rng: jax.Array
    ) -> tuple[Gaussians, Mapping[str, jax.Array]]:
        """Context views -> Gaussians with a leading batch axis [B, N, ...] and auxiliaries."""

    def loss_terms(
        self,
        params: Params,
        batch: Batch,
        gaussians: Gaussians,
        aux: Mapping[str, jax.Array],
        renders: RenderOutput,
        *,
        step: jax.Array,
        rng: jax.Array,
    ) -> Mapping[str, LossTerm]:
        """The family's objective as named weighted terms (renders: [B, V_target, ...])."""

    def param_labels(self, params: Params) -> Any:
        """A pytree like `params` of group names (e.g. "backbone", "head", "frozen") that the
        optimizer maps to learning rates / freezing from the config."""
