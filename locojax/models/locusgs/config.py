"""LocusGS / TokenGS hyper-parameters, each default written once (the LocusGS paper = `locusgs_1024`).

`ModelConfig` is `config.model` and `LossConfig` is `config.loss`. The defaults are LocusGS's (anchors
on, the official leo-frank/LocusGS 1024-token model); TokenGS is the same family with
`model.anchors=False`, which `configs/locusgs.py` pairs with the TokenGS values of four more keys
(`model.supervised_layers=(12,)`, `model.unused_params=False`, `loss.layer_weights=(1.0,)`,
`loss.anchor_vis_weight=0.0`). `configs/locusgs.py` / `configs/tokengs.py` build their ConfigDicts from
these dataclasses and presets change single values; `build(config)` reads them back through
`model_config_from` / `loss_config_from` (`locojax.models.common.config_mapping.from_mapping`), which
reject unknown keys naming the closest valid ones.
"""

from __future__ import annotations

import dataclasses

from locojax.models.common.config_mapping import from_mapping

VIS_MODES = ("kept", "paper")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """`config.model`: the network (official LocusGS module; TokenGS = anchors off)."""

    dim: int = 1024
    heads: int = 16
    patch: int = 8
    encoder_layers: int = 3
    decoder_layers: int = 12
    num_tokens: int = 1024                # N Gaussian tokens
    gaussians_per_token: int = 64         # K
    encoder_layer_scale: float = 1e-2
    decoder_layer_scale: float = 5e-5
    anchors: bool = True                  # LocusGS (True) / TokenGS (False: z + 1 head offset, no anchors)
    # 1-based decoder layers whose Gaussians are decoded and supervised, the final one last (Table 5;
    # TokenGS: the last layer only).
    supervised_layers: tuple = (6, 12)
    # Table 4/5 ablations (anchors on only):
    refine_radius: bool = True            # False: r stays r0
    anchor_self_pe: bool = True           # False: content-only self-attention
    anchor_cross_bias: bool = True        # False: content-only cross-attention
    radius_in_bias: bool = True           # False: sigma = 0.1 r0 (radius not in the bias)
    anchored_centres: bool = True         # False: free centres (TokenGS head, anchors only for attention)
    # The official LocusGS module also holds 4 LayerNorms per decoder layer and tau_sample that forward
    # never uses (52,236 params at width 1024); True adds them so counts and checkpoints match.
    unused_params: bool = True
    # Queries per attention chunk (exact; bounds the logits' memory); 0: unchunked.
    attention_query_chunk: int = 256
    scale_max: float = 0.075              # Gaussian scale cap in scene units (official head)
    # Official: zero head bias (0.0): every Gaussian starts at (0, 0, 1). s > 0 puts the K Gaussians of
    # a token on a ceil(sqrt K)^2 lateral grid over [-s, s]^2 (a tiny-budget departure; 0.5 did not
    # help tokengs_tiny: 18.75 dB at step 1000 of 2000 vs 18.84 without, lr 2e-3, so no preset uses it).
    head_xy_grid: float = 0.0
    # Network frame: poses relative to context view 0, positions times 1 / max_i |c_i - c_0|
    # ("context", LocusGS RE10K), or a constant as a string ("0.15": DL3DV; "1.0": as given).
    pose_scale: str = "context"

    def __post_init__(self):
        pose_scale_value(self.pose_scale)  # a clear error at build time


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """`config.loss`: the LocusGS paper eqs. 26-30 (the TokenGS objective plus anchor visibility).

    Per supervised layer l_m (eq. 29):
      L^{l_m} = mse_weight MSE + dssim_weight (1 - SSIM) / 2 + vis_weight L_vis(Gaussian centres)
                + anchor_vis_weight L_vis(anchor centres),
    D-SSIM with 'same' padding (fused-ssim, as TokenGS trains; `locojax.losses.dssim`), L_vis (eq. 28)
    over the target views clamped per point at vis_clamp (TokenGS `visibility_distance_threshold`).
    The objective is sum_m layer_weights[m] L^{l_m}, eq. 30: w_m = m / sum_n n over the supervised
    layers (6, 12) -> 1/3, 2/3. Paper: lambda_SSIM 0.2, lambda_G 1.0, lambda_A 0.1 "in all experiments".
    """

    layer_weights: tuple = (1.0 / 3.0, 2.0 / 3.0)  # one per config.model.supervised_layers (eq. 30)
    mse_weight: float = 1.0
    dssim_weight: float = 0.2             # lambda_SSIM (eq. 26)
    vis_weight: float = 1.0               # lambda_G (eq. 29)
    anchor_vis_weight: float = 0.1        # lambda_A (eq. 29); TokenGS 0
    vis_clamp: float = 1.0
    # L_vis of the Gaussian centres: "kept" (the released code: only the Gaussians the rasteriser keeps,
    # projected by it; culled ones are free) or "paper" (eq. 28 on every centre; pushed all centres to
    # the far clamp at tiny budgets). Anchors always use eq. 28.
    vis_mode: str = "kept"

    def __post_init__(self):
        if self.vis_mode not in VIS_MODES:
            raise ValueError(f"config.loss.vis_mode={self.vis_mode!r}: expected 'kept' (released code) or 'paper'")


def pose_scale_value(value):
    """`config.model.pose_scale` -> "context" or a float; ValueError naming the key otherwise."""
    if value == "context":
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"config.model.pose_scale={value!r}: expected 'context' (1 / max context-camera "
                         "distance from view 0) or a number") from None


def model_config_from(model_cfg) -> ModelConfig:
    return from_mapping(ModelConfig, model_cfg, "model")


def loss_config_from(loss_cfg) -> LossConfig:
    return from_mapping(LossConfig, loss_cfg, "loss")
