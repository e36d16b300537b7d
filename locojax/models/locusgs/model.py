"""`LocusModel`: the GaussianModel of TokenGS (anchors off) and LocusGS (anchors on).

predict: context Views -> Gaussians of the last supervised layer (final) and, for LocusGS, decoder
layer 6's Gaussians in `Prediction.extra` ("layer_<i>"). The network works in the frame of context
view 0 (official: poses relative to the first input view); Gaussians are mapped back to world.
loss_terms (eqs. 29-30 / official): per supervised layer l with weight w_l,
  w_l * (MSE + 0.2 (1 - SSIM_same) / 2 + 1.0 L_vis(centres) + 0.1 L_vis(anchors)), clamp 1.0.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp

from locojax.losses.photometric import dssim, mse
from locojax.losses.visibility import visibility_loss
from locojax.models.common.frames import gaussians_from_frame
from locojax.models.interface import FINAL, LossTerm, Prediction
from locojax.models.locusgs.decode import decode
from locojax.models.locusgs.network import LocusNet, NetConfig
from locojax.types import Batch, RenderOutput, Views


@dataclasses.dataclass(frozen=True)
class LossConfig:
    layer_weights: tuple = (1.0,)   # one per supervised layer (LocusGS (1/3, 2/3))
    mse_weight: float = 1.0
    dssim_weight: float = 0.2
    vis_weight: float = 1.0
    anchor_vis_weight: float = 0.0  # LocusGS 0.1
    vis_clamp: float = 1.0


def layer_name(i: int) -> str:
    return f"layer_{i}"


class LocusModel:
    name = "locusgs"
    sh_degree = 0

    def __init__(self, net_cfg: NetConfig, loss: LossConfig):
        if len(loss.layer_weights) != len(net_cfg.supervised_layers):
            raise ValueError(f"config.loss.layer_weights {loss.layer_weights} needs one weight per "
                             f"config.model.supervised_layers {net_cfg.supervised_layers}")
        self.net_cfg, self.loss_cfg = net_cfg, loss
        self.net = LocusNet(net_cfg)
        self.num_gaussians = net_cfg.num_tokens * net_cfg.gaussians_per_token

    @staticmethod
    def relative_cameras(context: Views):
        """c2w [B, V, 4, 4] -> (c2w relative to view 0, view 0's c2w [B, 4, 4])."""
        c2w = context.c2w.astype(jnp.float32)
        frame = c2w[:, 0]
        return jnp.einsum("bij,bvjk->bvik", jnp.linalg.inv(frame), c2w), frame

    def init(self, rng, batch: Batch):
        c = batch.context
        rel, _ = self.relative_cameras(c)
        return self.net.init(rng, c.images[:1], rel[:1], c.intrinsics[:1])["params"]

    def predict(self, params, context: Views, *, step=None, train: bool = False, rng=None):
        rel, frame = self.relative_cameras(context)
        outs = self.net.apply({"params": params}, context.images, rel, context.intrinsics)
        cfg = self.net_cfg
        anchored = cfg.anchors and cfg.anchored_centres
        b = frame.shape[0]
        ones = jnp.ones((b,), jnp.float32)
        sets, aux = {}, {}
        for layer, o in zip(cfg.supervised_layers, outs):
            # z + 1 only for TokenGS: LocusGS's free-centre ablation has no offset (official code)
            g = gaussians_from_frame(decode(o.raw, o.mu, o.radius, anchored=anchored,
                                            z_offset=0.0 if cfg.anchors else 1.0), frame, ones)
            sets[layer] = g
            if cfg.anchors:
                aux[f"anchors_{layer}"] = jnp.einsum("bij,bnj->bni", frame[:, :3, :3], o.mu) + frame[:, None, :3, 3]
        last = cfg.supervised_layers[-1]
        extra = {layer_name(l): sets[l] for l in cfg.supervised_layers[:-1]} if train else {}
        aux["num_active_gaussians"] = jnp.full((b,), self.num_gaussians, jnp.int32)
        return Prediction(sets[last], aux, extra)

    def loss_terms(self, params, batch: Batch, prediction: Prediction, renders: Mapping[str, RenderOutput],
                   *, step=None, rng=None):
        lc, cfg = self.loss_cfg, self.net_cfg
        tgt = batch.target
        last = cfg.supervised_layers[-1]
        terms = {}
        for layer, w in zip(cfg.supervised_layers, lc.layer_weights):
            name = FINAL if layer == last else layer_name(layer)
            g = prediction.gaussians if layer == last else prediction.extra[name]
            rgb = renders[name].rgb
            sfx = "" if layer == last else f"_{layer_name(layer)}"
            terms["mse" + sfx] = LossTerm(w * lc.mse_weight, mse(rgb, tgt.images))
            terms["dssim" + sfx] = LossTerm(w * lc.dssim_weight, dssim(rgb, tgt.images, padding="same"))
            terms["vis" + sfx] = LossTerm(w * lc.vis_weight, jnp.mean(
                visibility_loss(g.means, tgt.c2w, tgt.intrinsics, max_penalty=lc.vis_clamp)))
            if cfg.anchors and lc.anchor_vis_weight > 0:
                terms["anchor_vis" + sfx] = LossTerm(w * lc.anchor_vis_weight, jnp.mean(visibility_loss(
                    prediction.aux[f"anchors_{layer}"], tgt.c2w, tgt.intrinsics, max_penalty=lc.vis_clamp)))
        return terms

    def param_labels(self, params):
        """"head" for the Gaussian head (no weight decay in the official code), "default" otherwise."""
        return {k: jax.tree_util.tree_map(lambda _, k=k: "head" if k == "gaussian_head" else "default", v)
                for k, v in params.items()}
