"""TokenGS and LocusGS (arXiv 2608.12825) in Flax: one family, anchors on (`locusgs_*`) or off (`tokengs_*`).

    from locojax.models.locusgs import build
    model = build(config)   # config.model / config.loss from configs/locusgs.py or configs/tokengs.py

Modules: `config` (`ModelConfig` = config.model, `LossConfig` = config.loss, every default written
once), `network` (tokenizer, encoder, decoder with anchors, refinement heads), `decode` (head
activations), `model` (GaussianModel, objective).
"""

from __future__ import annotations

import jax.numpy as jnp

from locojax.models.locusgs.config import LossConfig, ModelConfig, loss_config_from, model_config_from
from locojax.models.locusgs.model import LocusModel, RenderPlanes
from locojax.models.locusgs.network import NetConfig


def net_config_from(config) -> NetConfig:
    """`config.model` (+ the run-wide `config.precision`) -> the network's `NetConfig`."""
    dtype = str(config.get("precision", "float32"))
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"config.precision={dtype!r}: expected 'float32' or 'bfloat16'")
    m = model_config_from(config.model)
    return NetConfig.from_model(m, dtype=getattr(jnp, dtype), query_chunk=m.attention_query_chunk or None)


def build(config) -> LocusModel:
    r = config.render
    planes = RenderPlanes(near=float(r.near), far=float(r.far), eps2d=float(r.eps2d))
    return LocusModel(model_config_from(config.model), loss_config_from(config.loss), net_config_from(config),
                      planes)


__all__ = ["LocusModel", "LossConfig", "ModelConfig", "NetConfig", "build", "loss_config_from",
           "model_config_from", "net_config_from"]
