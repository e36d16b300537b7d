"""TokenGS and LocusGS (paper 002) in Flax: one family, anchors on (`locusgs_*`) or off (`tokengs_*`).

    from locojax.models.locusgs import build
    model = build(config)   # config.model / config.loss from configs/locusgs.py or configs/tokengs.py

Modules: `network` (tokenizer, encoder, decoder with anchors, refinement heads), `decode` (head
activations), `model` (GaussianModel, objective).
"""

from __future__ import annotations

import jax.numpy as jnp

from locojax.models.locusgs.model import LocusModel, LossConfig
from locojax.models.locusgs.network import NetConfig

_NET_KEYS = ("dim", "heads", "patch", "encoder_layers", "decoder_layers", "num_tokens", "gaussians_per_token",
             "encoder_layer_scale", "decoder_layer_scale", "anchors", "refine_radius", "anchor_self_pe",
             "anchor_cross_bias", "radius_in_bias", "anchored_centres", "unused_params", "head_xy_grid")


def net_config_from(config) -> NetConfig:
    m = config.model
    dtype = str(config.get("precision", "float32"))
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"config.precision={dtype!r}: expected 'float32' or 'bfloat16'")
    chunk = m.get("attention_query_chunk", 0) or None
    return NetConfig(**{k: m[k] for k in _NET_KEYS}, supervised_layers=tuple(m.supervised_layers),
                     dtype=getattr(jnp, dtype), query_chunk=chunk)


def build(config) -> LocusModel:
    lc = config.loss
    loss = LossConfig(layer_weights=tuple(float(w) for w in lc.layer_weights), mse_weight=lc.mse_weight,
                      dssim_weight=lc.dssim_weight, vis_weight=lc.vis_weight,
                      anchor_vis_weight=lc.anchor_vis_weight, vis_clamp=lc.vis_clamp,
                      scale_max=float(config.model.get("scale_max", 0.075)),
                      pose_scale=_pose_scale(config.model.get("pose_scale", 1.0)),
                      vis_mode=str(lc.get("vis_mode", "kept")),
                      render_near=float(config.render.near), render_far=float(config.render.far),
                      render_eps2d=float(config.render.get("eps2d", 0.3)))
    if loss.vis_mode not in ("kept", "paper"):
        raise ValueError(f"config.loss.vis_mode={loss.vis_mode!r}: expected 'kept' (released code) or 'paper'")
    return LocusModel(net_config_from(config), loss)


def _pose_scale(value):
    if value == "context":
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"config.model.pose_scale={value!r}: expected 'context' (1 / max context-camera "
                         "distance from view 0) or a number") from None
