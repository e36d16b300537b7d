"""A small but real GaussianModel for trainer tests (independent of any paper family).

Per scene: N learned base Gaussians around the origin whose colours an MLP shifts from pooled
context-view colours. Parameter groups: "backbone" (the MLP), "head" (the base Gaussians) and
"frozen" (a never-updated offset), to exercise the optimizer's group handling.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from locojax.models.common.precision import PrecisionPolicy
from locojax.models.interface import FINAL, LossTerm, Prediction
from locojax.types import Gaussians

SH_C0 = 0.28209479177387814


@dataclasses.dataclass(frozen=True)
class ToyModel:
    num_gaussians: int = 64
    sh_degree: int = 0
    hidden: int = 32
    pool: int = 4  # context images are average-pooled to pool x pool cells per view
    name: str = "toy"
    nan_steps: tuple = ()  # steps (0-based) whose loss is NaN (tests of the non-finite guard)
    nan_from_step: int = -1  # every step from this one on is NaN (-1: never)
    dtype: str = "float32"  # compute dtype of the MLP (config.precision)

    def init(self, rng, batch):
        v = batch.context.images.shape[1]
        n, h = self.num_gaussians, self.hidden
        k = jax.random.split(rng, 6)
        d_in = v * self.pool * self.pool * 3
        return {
            "backbone": {
                "dense1": {"kernel": jax.random.normal(k[0], (d_in, h)) / jnp.sqrt(d_in), "bias": jnp.zeros(h)},
                "dense2": {"kernel": jax.random.normal(k[1], (h, n * 3)) * 0.1 / jnp.sqrt(h), "bias": jnp.zeros(n * 3)},
            },
            "head": {
                "means": jax.random.normal(k[2], (n, 3)) * 0.6,
                "log_scales": jnp.full((n, 3), jnp.log(0.25)),
                "opacity_logits": jnp.zeros((n,)),
                "color_bias": jnp.zeros((n, 3)),
            },
            "frozen": {"offset": jnp.zeros((3,))},
        }

    def param_labels(self, params):
        return {k: jax.tree_util.tree_map(lambda _: k, v) for k, v in params.items()}

    def predict(self, params, context, *, step, train, rng):
        b, v, hh, ww, _ = context.images.shape
        p = self.pool
        pooled = context.images.reshape(b, v, p, hh // p, p, ww // p, 3).mean(axis=(3, 5))
        dtype = PrecisionPolicy.from_config({}, self.dtype).dtype("mlp")
        x = pooled.reshape(b, -1).astype(dtype)
        bb = jax.tree_util.tree_map(lambda a: a.astype(dtype), params["backbone"])
        x = jax.nn.gelu(x @ bb["dense1"]["kernel"] + bb["dense1"]["bias"])
        colors = (x @ bb["dense2"]["kernel"] + bb["dense2"]["bias"]).reshape(b, self.num_gaussians, 3)
        colors = colors.astype(jnp.float32)
        head = params["head"]
        colors = colors + head["color_bias"] + params["frozen"]["offset"]
        n = self.num_gaussians
        means = jnp.broadcast_to(head["means"], (b, n, 3))
        gaussians = Gaussians(
            means=means,
            quats=jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0, 0.0], means.dtype), (b, n, 4)),
            scales=jnp.broadcast_to(jnp.exp(head["log_scales"]), (b, n, 3)),
            opacities=jnp.broadcast_to(jax.nn.sigmoid(head["opacity_logits"]), (b, n)),
            sh=(colors / SH_C0)[:, :, None, :],  # DC only: rgb = 0.5 + C0 * sh (gsplat)
        )
        # a per-scene diagnostic: evaluation records every aux["diag/<name>"] of shape [B]
        return Prediction(gaussians, {"colors": colors, "diag/color_std": jnp.std(colors, axis=(1, 2))})

    def loss_terms(self, params, batch, prediction, renders, *, step, rng):
        mse = jnp.mean((renders[FINAL].rgb - batch.target.images) ** 2)
        reg = jnp.mean(prediction.aux["colors"] ** 2)
        bad = jnp.zeros((), bool)
        for s in self.nan_steps:
            bad |= step == s
        if self.nan_from_step >= 0:
            bad |= step >= self.nan_from_step
        mse = jnp.where(bad, jnp.nan, mse)
        return {"mse": LossTerm(1.0, mse), "color_reg": LossTerm(1e-3, reg)}


def build(config):
    m = config.get("model", {})
    return ToyModel(num_gaussians=int(m.get("num_gaussians", 64)), hidden=int(m.get("hidden", 32)),
                    nan_steps=tuple(m.get("nan_steps", ())), nan_from_step=int(m.get("nan_from_step", -1)),
                    dtype=str(config.get("precision", "float32")))
