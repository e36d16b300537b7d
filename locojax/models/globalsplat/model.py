"""`GlobalSplatModel`: the `locojax.models.interface.GaussianModel` of GlobalSplat.

predict (context Views in the canonical frame -> Gaussians [B, N, ...] at full capacity
N = num_latents x 2^final_stage; lower curriculum stages are padded with zero-opacity copies, see
`decoder.py`), loss_terms (appendix 0.B.3, `locojax.models.globalsplat.losses`), param_labels.

With the consistency loss on and `train=True`, predict runs the two interleaved context subsets as
one 2B batch (as the official trainer does), returns subset A's Gaussians as the final set and
subset B's as the extra set "subset_b" (the trainer renders both on the same targets); loss_terms
forms eq. 49 from the two renders. Without it, predict uses all views.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from locojax import losses
from locojax.geometry.scene_normalization import globalsplat_frame_jax, to_frame_jax
from locojax.models.common.frames import gaussians_from_frame
from locojax.models.globalsplat import curriculum as cc
from locojax.models.globalsplat import losses as gl
from locojax.models.globalsplat import objective as gp
from locojax.models.globalsplat.config import LossConfig, ModelConfig, final_stage_of
from locojax.models.globalsplat.decoder import DecodedStage, decode_padded
from locojax.models.globalsplat.network import GlobalSplatNet, NetConfig
from locojax.models.globalsplat.rotation import rotation_6d_to_quaternion
from locojax.models.globalsplat.subsets import gather_views, interleaved_subsets
from locojax.models.interface import FINAL, LossTerm, Prediction
from locojax.types import Batch, Gaussians, RenderOutput, Views

LPIPS_KEY = "lpips_vgg"  # top-level params key of the frozen LPIPS-VGG weights
PERCEPTUAL_KEY = "perceptual_vgg"  # top-level params key of the frozen perceptual-loss VGG trunk
FROZEN_KEYS = (LPIPS_KEY, PERCEPTUAL_KEY)
SUBSET_B = "subset_b"  # the extra Gaussian set of the consistency loss's second context subset


@dataclasses.dataclass(frozen=True)
class CurriculumConfig:
    """The decoding schedule and frame handling, derived from `config.ModelConfig` (no defaults here)."""

    final_stage: int                          # G_final = 2^final_stage Gaussians per latent
    boundaries: tuple
    ramp_steps: int
    enabled: bool                             # False: Table 5's "direct full-capacity prediction"
    gate_tau: float
    eval_full_capacity: bool                  # train=False decodes the final stage (official test)
    normalize_scene: str                      # "context" or "none", see ModelConfig
    scale_max: float                          # s_max of eq. 46 (canonical units)

    @classmethod
    def from_model(cls, m: ModelConfig) -> "CurriculumConfig":
        final = final_stage_of(m)
        bounds = tuple(int(b) for b in m.stage_boundaries)
        if m.curriculum and len(bounds) < final:
            raise ValueError(f"config.model.stage_boundaries={bounds} has fewer than final_stage={final} "
                             f"entries (gaussians_per_token={m.gaussians_per_token})")
        if m.normalize_scene not in ("context", "none"):
            raise ValueError(f"config.model.normalize_scene={m.normalize_scene!r}: expected 'context' or 'none'")
        return cls(final_stage=final, boundaries=bounds, ramp_steps=m.stage_ramp_steps, enabled=m.curriculum,
                   gate_tau=m.gate_tau, eval_full_capacity=m.eval_full_capacity,
                   normalize_scene=m.normalize_scene, scale_max=m.scale_max)


def to_gaussians(dec: DecodedStage) -> Gaussians:
    """[B, P, G, ...] DecodedStage -> Gaussians [B, P * G, ...]."""
    b, p, g = dec.means.shape[:3]
    n = p * g
    return Gaussians(
        means=dec.means.reshape(b, n, 3),
        quats=rotation_6d_to_quaternion(dec.rot6d).reshape(b, n, 4),
        scales=dec.scales.reshape(b, n, 3),
        opacities=dec.opacities.reshape(b, n),
        sh=dec.sh.reshape(b, n, dec.sh.shape[-2], 3),
    )


class GlobalSplatModel:
    """GaussianModel for GlobalSplat (see module docstring)."""

    name = "globalsplat"
    loss_network_keys = (LPIPS_KEY, PERCEPTUAL_KEY)  # top-level params of loss networks, not of the model (describe)

    def __init__(self, net_cfg: NetConfig, curriculum: CurriculumConfig, loss: LossConfig,
                 mean_offset: tuple, lpips_params: Any = None):
        if (1 << curriculum.final_stage) > net_cfg.num_candidates:
            raise ValueError(f"config.model.gaussians_per_token=2^{curriculum.final_stage} exceeds "
                             f"num_candidates={net_cfg.num_candidates}")
        self.net_cfg, self.curriculum, self.loss_cfg = net_cfg, curriculum, loss
        self.mean_offset = tuple(float(x) for x in mean_offset)
        self.net = GlobalSplatNet(net_cfg)
        self.sh_degree = net_cfg.sh_degree
        self.gaussians_per_token = 1 << curriculum.final_stage
        self.num_gaussians = net_cfg.num_latents * self.gaussians_per_token
        self._lpips_params = lpips_params
        self.perceptual = gp.resolve_perceptual(loss)  # which trunk the perceptual term runs (logged)

    # ----- interface -----
    def init(self, rng, batch: Batch):
        """The network's params; with LPIPS in the loss, plus its frozen VGG weights under
        `LPIPS_KEY` (an argument of the jitted step rather than a 58 MB constant; labelled "frozen")."""
        c = batch.context
        params = dict(self.net.init(rng, jnp.asarray(c.images[:1]), jnp.asarray(c.c2w[:1]),
                                    jnp.asarray(c.intrinsics[:1]))["params"])
        if self.loss_cfg.lpips_weight > 0 and self._lpips_params is None:
            from locojax.metrics.lpips_weights import lpips_vgg_params

            params[LPIPS_KEY] = jax.tree_util.tree_map(jnp.asarray, lpips_vgg_params())
        if self.perceptual.arch is not None:
            params[PERCEPTUAL_KEY] = jax.tree_util.tree_map(jnp.asarray, gp.load_trunk(self.perceptual))
        return params

    @staticmethod
    def net_params(params):
        """The network's own params (without the frozen loss networks)."""
        return {k: v for k, v in params.items() if k not in FROZEN_KEYS}

    def stage_and_mix(self, step, train: bool = True):
        cur = self.curriculum
        if not cur.enabled or (not train and cur.eval_full_capacity):
            return jnp.asarray(cur.final_stage, jnp.int32), jnp.ones((), jnp.float32)
        return cc.stage_and_mix(step, cur.boundaries, cur.ramp_steps, cur.final_stage)

    def decode(self, params, context: Views, stage, mix):
        """Views [B, V, ...] -> (DecodedStage at full capacity, candidates)."""
        cand = self.net.apply({"params": self.net_params(params)}, context.images, context.c2w,
                              context.intrinsics)
        dec = decode_padded(cand, stage, mix, self.curriculum.final_stage,
                            gate_tau=self.curriculum.gate_tau, mean_offset=self.mean_offset,
                            scale_max=self.curriculum.scale_max)
        return dec, cand

    def predict(self, params, context: Views, *, step, train: bool, rng=None):
        stage, mix = self.stage_and_mix(step, train)
        frame = None
        b = context.images.shape[0]
        if self.curriculum.normalize_scene == "context":
            frame = globalsplat_frame_jax(context.c2w.astype(jnp.float32))
            context = context.replace(c2w=to_frame_jax(context.c2w.astype(jnp.float32), *frame))
        elif self.curriculum.normalize_scene != "none":
            raise ValueError(f"config.model.normalize_scene={self.curriculum.normalize_scene!r}: "
                             "expected 'context' or 'none'")
        use_subsets = train and self.loss_cfg.consistency
        if use_subsets:
            index = interleaved_subsets(context.index, jnp.asarray(step) % 2 == 1)
            views = jax.tree_util.tree_map(lambda a, b_: jnp.concatenate([a, b_], 0),
                                           gather_views(context, index[:, 0]), gather_views(context, index[:, 1]))
        else:
            views = context
        dec, cand = self.decode(params, views, stage, mix)
        gaussians = to_gaussians(dec)
        active = dec.active.reshape(dec.active.shape[0], -1)
        # Eq. 42 on the canonical means and cameras: the official code works in the canonical frame, so
        # its near (1e-2) and far bounds are canonical units (far: frustum_max_depth world units / s).
        scale = frame[1] if frame is not None else jnp.ones((b,), jnp.float32)
        frustum = gp.frustum_per_subset(gaussians.means, active, views, scale, self.loss_cfg)
        if frame is not None:
            reps = views.images.shape[0] // context.images.shape[0]
            gaussians = gaussians_from_frame(gaussians, *(jnp.concatenate([f] * reps, 0) for f in frame))
        aux = {
            "stage": stage, "mix": mix,
            "frame_scale": scale,  # [B] world units per canonical unit (1 when normalize_scene="none")
            "frustum": frustum,
            "active": active,
            "num_active_gaussians": jnp.sum(active, axis=1).astype(jnp.int32),
            "reg_scale": gl.scale_regularizer(cand.log_scale, math.log(self.curriculum.scale_max)),
            "reg_rotation": gl.rotation_regularizer(cand.rot6),
            "reg_sh": gl.sh_softcap_regularizer(cand.sh),
        }
        if use_subsets:
            half = lambda x, i: x[i * b:(i + 1) * b]  # noqa: E731
            aux["subset_index"] = index
            aux["subset_b_active"] = half(active, 1)
            aux["num_active_gaussians"] = half(aux["num_active_gaussians"], 0)
            aux["active"] = half(active, 0)
            subset_b = jax.tree_util.tree_map(lambda x: half(x, 1), gaussians)
            gaussians = jax.tree_util.tree_map(lambda x: half(x, 0), gaussians)
            return Prediction(gaussians, aux, {SUBSET_B: subset_b})
        return Prediction(gaussians, aux)

    def _subset_terms(self, params, gaussians: Gaussians, active, renders: RenderOutput, target: Views) -> dict:
        lc = self.loss_cfg
        out = {"mse": losses.mse(renders.rgb, target.images)}
        if lc.lpips_weight > 0:
            out["lpips"] = self._lpips(params, renders.rgb, target.images)
        if lc.perceptual_weight > 0:
            out["perceptual"] = gp.perceptual_term(self.perceptual, params.get(PERCEPTUAL_KEY), renders.rgb,
                                                   target.images)
        if lc.opacity_weight > 0:
            out["opacity"] = gl.opacity_regularizer(gaussians.opacities, alpha_max=lc.alpha_max, weights=active)
        return out

    def _lpips(self, params, pred, target):
        if LPIPS_KEY in params:
            weights = params[LPIPS_KEY]
        else:  # e.g. params converted from torch without init: None loads them (jit constants)
            weights = self._lpips_params
        return losses.lpips(pred, target, params=weights)

    def loss_terms(self, params, batch: Batch, prediction: Prediction, renders: Mapping[str, RenderOutput],
                   *, step, rng=None) -> Mapping[str, LossTerm]:
        lc = self.loss_cfg
        gaussians, aux = prediction.gaussians, prediction.aux
        renders, renders_b = renders[FINAL], renders.get(SUBSET_B)
        if renders_b is not None:
            g_b = prediction.extra[SUBSET_B]
            ta = self._subset_terms(params, gaussians, aux["active"], renders, batch.target)
            tb = self._subset_terms(params, g_b, aux["subset_b_active"], renders_b, batch.target)
            terms = {k: 0.5 * (ta[k] + tb[k]) for k in ta}  # eq. 49
            # Depths in canonical units, as the official code renders in the canonical frame.
            to_canonical = 1.0 / aux["frame_scale"].reshape((-1,) + (1,) * (renders.depth.ndim - 1))
            l_alpha, l_depth = gl.consistency_losses(renders.alpha, renders_b.alpha, renders.depth * to_canonical,
                                                     renders_b.depth * to_canonical,
                                                     support=lc.consistency_support)
        else:
            terms = self._subset_terms(params, gaussians, aux["active"], renders, batch.target)
            l_alpha = l_depth = None
        out = {
            "mse": LossTerm(lc.mse_weight, terms["mse"]),
            "frustum": LossTerm(lc.frustum_weight, aux["frustum"]),
            "decoder_reg": LossTerm(lc.decoder_weight,
                                    aux["reg_scale"] + aux["reg_rotation"] + aux["reg_sh"]),
        }
        for name, weight in (("perceptual", lc.perceptual_weight), ("lpips", lc.lpips_weight),
                             ("opacity", lc.opacity_weight)):
            if name in terms:
                out[name if name != "opacity" else "opacity_reg"] = LossTerm(weight, terms[name])
        if l_alpha is not None:
            out["consistency_alpha"] = LossTerm(lc.consistency_alpha_weight, l_alpha)
            out["consistency_depth"] = LossTerm(lc.consistency_depth_weight, l_depth)
        return out

    def param_labels(self, params):
        """"frozen" for the loss networks' weights (never updated), "default" for the network."""
        return {k: jax.tree_util.tree_map(lambda _, k=k: "frozen" if k in FROZEN_KEYS else "default", v)
                for k, v in params.items()}
