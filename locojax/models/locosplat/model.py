"""`LoCoSplatModel`: the `locojax.models.interface.GaussianModel` of LoCoSplat (arXiv 2610.04351).

predict: context Views -> the final Gaussian set G(D) [B, V*H*W rows] (dead rows inert) and, when
training with `coarse_set`, the coarse-depth set G(D~) as `Prediction.extra["coarse"]` (the trainer
renders both in one rasterisation: equal sizes). loss_terms: eq. 6, per set mse_weight * MSE +
lpips_weight * LPIPS-VGG, the coarse set's terms scaled by coarse_weight (beta = 0.9).
param_labels: "backbone" for the DINOv2 trunk (frozen, or lr 2e-6 when model.depth.trunk_trainable:
paper B.2), "frozen" for the LPIPS weights, "default" for everything else (lr 2e-4).

aux: "num_active_gaussians" [B] (anchors), and per-scene diagnostics "diag/<name>" [B]:
occupancy (anchors / rows), points_per_anchor, key_overflow + grid_overflow (points whose voxel or
coarse-cell key left the int32-safe range: counted, never silent), mean |offset| / v, depth mean
(metres); in evaluation (train=False) Table 13's depth-branch health (health.py): scale0_entropy,
scale0_w90, scale0_modal_share (per-scene medians / share over the scale-0 pixels), delta_u_px
(median adjacent-candidate disparity, scale-0 feature px) and mv_depth_rel_err.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from locojax import losses
from locojax.models.interface import FINAL, LossTerm, Prediction
from locojax.models.locosplat.config import LossConfig, ModelConfig
from locojax.models.locosplat.depth.config import require_trunk_weights
from locojax.models.locosplat.health import table13_diagnostics
from locojax.models.locosplat.network import COARSE_SET, FINAL_SET, LoCoSplatNet, NetOutput
from locojax.types import Batch, RenderOutput, Views

LPIPS_KEY = "lpips_vgg"  # top-level params key of the frozen LPIPS-VGG weights (when lpips_weight > 0)
NET_KEY = "net"
BACKBONE, FROZEN, DEFAULT = "backbone", "frozen", "default"


class LoCoSplatModel:
    name = "locosplat"
    loss_network_keys = (LPIPS_KEY,)  # frozen LPIPS-VGG weights: counted apart by experiments.describe

    def __init__(self, cfg: ModelConfig, loss: LossConfig, image_shape=None, num_views=None):
        self.cfg, self.loss_cfg = cfg, loss
        self.net = LoCoSplatNet(cfg)
        self.sh_degree = cfg.sh_degree
        # Static capacity: one row per pixel of every context view (paper B.1), known once the data
        # shape is; 0 until then (the trainer reads shapes from the Gaussians themselves).
        self.num_gaussians = int(num_views * image_shape[0] * image_shape[1]) if image_shape and num_views else 0

    # ----- interface -----
    def init(self, rng, batch: Batch):
        """Initial parameters. A frozen pretrained-width trunk needs converted weights
        (`require_trunk_weights`): checked when parameters are really made, not when they are only
        traced (`experiments.describe` runs init under jax.eval_shape and needs no weights)."""
        if not isinstance(rng, jax.core.Tracer):
            require_trunk_weights(self.cfg.depth)
        c = batch.context
        args = [jnp.asarray(a[:1]) for a in (c.images, c.intrinsics, c.c2w, c.near, c.far)]
        params = {NET_KEY: self.net.init(rng, *args, train=False)["params"]}
        if self.loss_cfg.lpips_weight > 0:
            from locojax.metrics.lpips_weights import lpips_vgg_params

            params[LPIPS_KEY] = jax.tree_util.tree_map(jnp.asarray, lpips_vgg_params())
        return params

    def apply_net(self, params, context: Views, *, train: bool, coarse: bool = False) -> NetOutput:
        return self.net.apply({"params": params[NET_KEY]}, context.images, context.intrinsics, context.c2w,
                              context.near, context.far, train=train, coarse=coarse)

    def predict(self, params, context: Views, *, step=None, train: bool, rng=None) -> Prediction:
        coarse = bool(train and self.cfg.coarse_set and self.loss_cfg.coarse_weight > 0)
        out = self.apply_net(params, context, train=train, coarse=coarse)
        final = out.sets[FINAL_SET]
        extra = {COARSE_SET: out.sets[COARSE_SET].gaussians} if coarse else {}
        return Prediction(final.gaussians, self._aux(out, context, train=train), extra)

    def _aux(self, out: NetOutput, context: Views, *, train: bool) -> dict:
        final = out.sets[FINAL_SET]
        a = final.anchors
        rows = a.count.shape[-1]
        num = a.num_anchors
        f32 = jnp.float32
        aux = {
            "num_active_gaussians": num.astype(jnp.int32),
            "diag/occupancy": num.astype(f32) / rows,
            "diag/points_per_anchor": rows / jnp.maximum(num, 1).astype(f32),
            "diag/key_overflow": (a.key_overflow + final.grid_overflow).astype(f32),
            "diag/offset_voxels": jnp.sum(jnp.abs(final.offsets), axis=(1, 2)) / (
                3.0 * jnp.maximum(num, 1).astype(f32) * self.cfg.voxel_size),
            "diag/depth_mean": jnp.mean(out.depth.depth, axis=(1, 2, 3)),
        }
        if not train:  # Table 13 (health.py): evaluation only, the disparity sort is not free
            d = out.depth
            health = table13_diagnostics(d.match_prob0, d.coarse_depth, d.depth, context.intrinsics,
                                         context.c2w, context.near, context.far, self.cfg.depth.num_neighbours)
            aux.update({f"diag/{k}": v for k, v in health.items()})
        if COARSE_SET in out.sets:
            c = out.sets[COARSE_SET]
            aux["diag/coarse_occupancy"] = c.anchors.num_anchors.astype(f32) / rows
            aux["diag/key_overflow"] = aux["diag/key_overflow"] + (c.anchors.key_overflow + c.grid_overflow).astype(f32)
        return aux

    def _photometric(self, params, render: RenderOutput, target) -> dict:
        out = {"mse": losses.mse(render.rgb, target)}
        if self.loss_cfg.lpips_weight > 0:
            out["lpips"] = losses.lpips(render.rgb, target, params=params.get(LPIPS_KEY))
        return out

    def loss_terms(self, params, batch: Batch, prediction: Prediction, renders: Mapping[str, RenderOutput],
                   *, step=None, rng=None) -> Mapping[str, LossTerm]:
        """Eq. 6 (MSE and LPIPS are means over pixels and targets, as VolSplat's losses)."""
        lc = self.loss_cfg
        weights = {"mse": lc.mse_weight, "lpips": lc.lpips_weight}
        terms = {k: LossTerm(weights[k], v) for k, v in self._photometric(params, renders[FINAL], batch.target.images).items()}
        if COARSE_SET in renders:
            for k, v in self._photometric(params, renders[COARSE_SET], batch.target.images).items():
                terms[f"coarse_{k}"] = LossTerm(lc.coarse_weight * weights[k], v)
        return terms

    def param_parts(self, params) -> dict:
        """Parameter counts of the paper's named parts (B.1), for `experiments.describe`: "trunk" (the
        DINOv2 trunk), "depth_branch" (the rest of the depth branch), "gaussian_regressor", "W" (the grid
        projections W_l, all levels: 4,256 for two), "g" (the fusion MLP: 141,956; its input grows by
        proj_dim per level, i.e. +proj_dim x fusion_hidden = 16 x 256 per extra level), "h" (6,460).
        Works on abstract parameters (ShapeDtypeStructs) too."""
        parts = {k: 0 for k in ("trunk", "depth_branch", "gaussian_regressor", "W", "g", "h")}
        for path, leaf in jax.tree_util.tree_leaves_with_path(params.get(NET_KEY, {})):
            keys = [str(getattr(k, "key", k)) for k in path]
            size = int(np.prod(leaf.shape))
            if keys[:2] == ["depth", "trunk"]:
                parts["trunk"] += size
            elif keys[0] == "depth":
                parts["depth_branch"] += size
            elif keys[0].startswith("gaussian_regressor"):
                parts["gaussian_regressor"] += size
            elif keys[0] == "local_context":
                parts["W" if keys[1].startswith("proj_") else "g"] += size
            elif keys[0] == "head":
                parts["h"] += size
            else:
                raise ValueError(f"param_parts: unassigned parameter {'/'.join(keys)}")
        return parts

    def param_labels(self, params) -> Any:
        def label(path, _):
            keys = [str(getattr(k, "key", k)) for k in path]
            if keys[0] == LPIPS_KEY:
                return FROZEN
            if keys[:3] == [NET_KEY, "depth", "trunk"]:
                return BACKBONE
            return DEFAULT

        return jax.tree_util.tree_map_with_path(label, params)
