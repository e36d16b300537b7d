"""`LocusModel`: the GaussianModel of TokenGS (anchors off) and LocusGS (anchors on).

predict: context Views -> Gaussians of the last supervised layer (final) and, for LocusGS, decoder
layer 6's Gaussians in `Prediction.extra` ("layer_<i>"). The network works in the frame of context
view 0 (official: poses relative to the first input view); Gaussians are mapped back to world.
loss_terms (eqs. 29-30 / official): per supervised layer l with weight w_l,
  w_l * (MSE + 0.2 (1 - SSIM_same) / 2 + 1.0 L_vis(centres) + 0.1 L_vis(anchors)), clamp 1.0.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import jax
import jax.numpy as jnp

from locojax.losses.photometric import dssim, mse
from locojax.losses.visibility import kept_visibility_loss, visibility_loss
from locojax.models.common.frames import gaussians_from_frame
from locojax.models.interface import FINAL, LossTerm, Prediction
from locojax.models.locusgs.config import LossConfig, ModelConfig, pose_scale_value
from locojax.models.locusgs.decode import decode
from locojax.models.locusgs.network import LocusNet, NetConfig
from locojax.types import Batch, RenderOutput, Views


class RenderPlanes(NamedTuple):
    """The rasteriser's near / far planes and eps2d (`config.render`), for the "kept" L_vis, which
    projects the centres as the rasteriser does."""

    near: float
    far: float
    eps2d: float


def layer_name(i: int) -> str:
    return f"layer_{i}"


def centroid_dispersion(means, num_tokens: int):
    """Eq. 12 (LocusGS Table 3): C_centroid = 1/(N K) sum_i sum_k |mu_ik - mean_k mu_ik|_2, the mean
    distance of a token's K Gaussians from their centroid. means [B, N * K, 3] -> [B]. Distances are
    those of the network frame (poses relative to view 0, a rigid map), so in scene units."""
    b = means.shape[0]
    m = means.astype(jnp.float32).reshape(b, num_tokens, -1, 3)
    return jnp.mean(jnp.linalg.norm(m - jnp.mean(m, axis=2, keepdims=True), axis=-1), axis=(1, 2))


class LocusModel:
    """model_cfg / loss_cfg: `config.model` / `config.loss` (`locojax.models.locusgs.config`); net_cfg:
    the network's configuration (`locojax.models.locusgs.net_config_from`); planes: `config.render`'s."""

    name = "locusgs"
    sh_degree = 0

    def __init__(self, model_cfg: ModelConfig, loss_cfg: LossConfig, net_cfg: NetConfig,
                 planes: RenderPlanes):
        if len(loss_cfg.layer_weights) != len(net_cfg.supervised_layers):
            raise ValueError(f"config.loss.layer_weights {loss_cfg.layer_weights} needs one weight per "
                             f"config.model.supervised_layers {net_cfg.supervised_layers}")
        self.model_cfg, self.loss_cfg, self.net_cfg, self.planes = model_cfg, loss_cfg, net_cfg, planes
        self.pose_scale = pose_scale_value(model_cfg.pose_scale)  # "context" or a float
        self.net = LocusNet(net_cfg)
        self.num_gaussians = net_cfg.num_tokens * net_cfg.gaussians_per_token

    def relative_cameras(self, context: Views):
        """c2w [B, V, 4, 4] -> (c2w relative to view 0 with positions times s, view 0's c2w [B, 4, 4],
        s [B]). The network works in that frame (official data pipeline: poses relative to the first
        input view, RE10K scaled by 1 / max_i |c_i - c_0|, DL3DV by 0.15)."""
        c2w = context.c2w.astype(jnp.float32)
        frame = c2w[:, 0]
        rel = jnp.einsum("bij,bvjk->bvik", jnp.linalg.inv(frame), c2w)
        b = c2w.shape[0]
        ps = self.pose_scale
        if ps == "context":
            d = jnp.max(jnp.linalg.norm(rel[:, :, :3, 3], axis=-1), axis=1)
            s = jnp.where(d > 1e-6, 1.0 / jnp.maximum(d, 1e-6), 1.0)  # coincident views: unscaled
        else:
            s = jnp.full((b,), float(ps), jnp.float32)
        rel = rel.at[:, :, :3, 3].multiply(s[:, None, None])
        return rel, frame, s

    def init(self, rng, batch: Batch):
        c = batch.context
        rel, _, _ = self.relative_cameras(c)
        return self.net.init(rng, c.images[:1], rel[:1], c.intrinsics[:1])["params"]

    def predict(self, params, context: Views, *, step=None, train: bool = False, rng=None):
        rel, frame, s = self.relative_cameras(context)
        outs = self.net.apply({"params": params}, context.images, rel, context.intrinsics)
        cfg = self.net_cfg
        anchored = cfg.anchors and cfg.anchored_centres
        b = frame.shape[0]
        inv_s = 1.0 / s  # network-frame Gaussians -> world: positions and scales times 1 / s
        sets, aux = {}, {}
        for layer, o in zip(cfg.supervised_layers, outs):
            # z + 1 only for TokenGS: LocusGS's free-centre ablation has no offset (official code)
            g = decode(o.raw, o.mu, o.radius, anchored=anchored, z_offset=0.0 if cfg.anchors else 1.0,
                       scale_max=self.model_cfg.scale_max)
            g = gaussians_from_frame(g, frame, inv_s)
            sets[layer] = g
            if cfg.anchors:
                aux[f"anchors_{layer}"] = (jnp.einsum("bij,bnj->bni", frame[:, :3, :3], o.mu * inv_s[:, None, None])
                                           + frame[:, None, :3, 3])
                aux[f"anchor_radii_{layer}"] = o.radius * inv_s[:, None]  # [B, N] world units, as the anchors
        last = cfg.supervised_layers[-1]
        extra = {layer_name(l): sets[l] for l in cfg.supervised_layers[:-1]} if train else {}
        aux["num_active_gaussians"] = jnp.full((b,), self.num_gaussians, jnp.int32)
        # in network-frame units (as the paper's Table 3): world distances times s
        aux["diag/centroid_dispersion"] = centroid_dispersion(sets[last].means, cfg.num_tokens) * s
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
            if lc.vis_mode == "kept":
                h, wd = tgt.image_shape
                vis = kept_visibility_loss(g, tgt.c2w, tgt.intrinsics, width=wd, height=h, near=self.planes.near,
                                           far=self.planes.far, eps2d=self.planes.eps2d, max_penalty=lc.vis_clamp)
            else:
                vis = visibility_loss(g.means, tgt.c2w, tgt.intrinsics, max_penalty=lc.vis_clamp)
            terms["vis" + sfx] = LossTerm(w * lc.vis_weight, jnp.mean(vis))
            if cfg.anchors and lc.anchor_vis_weight > 0:
                terms["anchor_vis" + sfx] = LossTerm(w * lc.anchor_vis_weight, jnp.mean(visibility_loss(
                    prediction.aux[f"anchors_{layer}"], tgt.c2w, tgt.intrinsics, max_penalty=lc.vis_clamp)))
        return terms

    def param_labels(self, params):
        """"head" for the Gaussian head (no weight decay in the official code), "default" otherwise."""
        return {k: jax.tree_util.tree_map(lambda _, k=k: "head" if k == "gaussian_head" else "default", v)
                for k, v in params.items()}
