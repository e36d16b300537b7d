"""The contract between a model family and the shared trainer / evaluator.

A family (GlobalSplat, LoCoSplat, LocusGS/TokenGS) supplies one object implementing
`GaussianModel`; `locojax.train` never imports a family directly, it receives the object from
`locojax.models.registry.build_model(config)`, and a family never imports `locojax.train` (the
trainer renders; a family only describes what to render). Everything here must be jittable: `step`
is a traced int32 scalar (curriculum stages change without recompiling), shapes depend only on the
config.

The trainer's step is:

    pred = model.predict(params, batch.context, step=step, train=True, rng=rng)
    renders = {name: render(g, batch.target) for name, g in pred.render_sets().items()}
    terms = model.loss_terms(params, batch, pred, renders, step=step, rng=rng)
    loss = sum(terms[k].weight * terms[k].value)

`pred.gaussians` is the final set (rendered under the name "final"): evaluation renders it and
exports it. `pred.extra` holds further sets rendered on the same targets during training only, each
supervised with its own weight in `loss_terms` (LoCoSplat: the coarse-depth set; LocusGS: decoder
layer 6; GlobalSplat: the second context subset of the consistency loss). Sets of equal size are
rasterised together in one call.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Protocol

import flax.struct
import jax

from locojax.types import Batch, Gaussians, RenderOutput, Views

Params = Any  # a pytree of arrays

FINAL = "final"  # the name of the final set in `Prediction.render_sets()` and in `renders`


class LossTerm(NamedTuple):
    """One weighted term of an objective; the trainer logs `value` and sums `weight * value`."""

    weight: float | jax.Array
    value: jax.Array


@flax.struct.dataclass
class Prediction:
    """What `GaussianModel.predict` returns.

    Attributes:
      gaussians: the final set, Gaussians [B, N, ...] (float32 once the trainer casts it).
      aux: named arrays for the loss and logs. `aux["num_active_gaussians"]` ([B] int32), when
        present, is what evaluation reports as the scene's Gaussian count (padding excluded).
      extra: name -> Gaussians [B, N', ...]: sets the trainer renders on the targets during
        training (never during evaluation) and passes to `loss_terms` as `renders[name]`.
    """

    gaussians: Gaussians
    aux: Mapping[str, Any] = flax.struct.field(default_factory=dict)
    extra: Mapping[str, Gaussians] = flax.struct.field(default_factory=dict)

    def render_sets(self) -> dict[str, Gaussians]:
        if FINAL in self.extra:
            raise ValueError(f"Prediction.extra may not use the reserved name {FINAL!r}")
        return {FINAL: self.gaussians, **dict(self.extra)}


class GaussianModel(Protocol):
    """What the trainer and evaluator need of a model family."""

    name: str
    num_gaussians: int  # Gaussians per scene of the final set at full capacity (static)
    # Optional: top-level params keys that hold a loss network (e.g. frozen LPIPS-VGG weights), counted
    # apart from the model's parameters by `experiments.describe`; default ().
    # loss_network_keys: tuple[str, ...]
    sh_degree: int

    def init(self, rng: jax.Array, batch: Batch) -> Params:
        """Initial parameters (used under `jax.eval_shape` for abstract state too)."""

    def predict(self, params: Params, context: Views, *, step: jax.Array, train: bool,
                rng: jax.Array) -> Prediction:
        """Context views [B, V, ...] -> the Gaussian sets with a leading batch axis."""

    def loss_terms(
        self,
        params: Params,
        batch: Batch,
        prediction: Prediction,
        renders: Mapping[str, RenderOutput],
        *,
        step: jax.Array,
        rng: jax.Array,
    ) -> Mapping[str, LossTerm]:
        """The family's objective as named weighted terms; `renders[name]` is [B, V_target, ...]
        for every name of `prediction.render_sets()` ("final" first)."""

    def param_labels(self, params: Params) -> Any:
        """A pytree like `params` of group names (e.g. "backbone", "head", "frozen") that the
        optimizer maps to learning rates / freezing from the config."""
