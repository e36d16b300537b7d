"""GlobalSplat's hyper-parameters, each default written once (the GlobalSplat paper Table 6 = the 16k model).

`ModelConfig` is `config.model` and `LossConfig` is `config.loss`: `configs/globalsplat.py` builds
its ConfigDicts from these dataclasses (presets then change single values), and `build(config)`
reads them back through `model_config_from` / `loss_config_from`
(`locojax.models.common.config_mapping.from_mapping`), which reject unknown keys with the closest
valid ones. Two keys of `config.model` are not architecture and not here: `remat` and
`precision.{tokenizer,encoder,heads}` follow the run-wide `config.remat` / `config.precision` unless
set (see `PRECISION_PARTS`).
"""

from __future__ import annotations

import dataclasses
import math

from locojax.models.common.config_mapping import from_mapping
from locojax.models.common.precision import PrecisionPolicy
from locojax.models.globalsplat.decoder import SCALE_MAX

# The parts of the network that can compute in their own dtype (`config.model.precision.<part>`).
# Parameters, the curriculum merge, the canonical-frame transforms, the Gaussians and the loss stay
# float32 whatever these say (the heads' outputs are cast to float32 before decoding).
PRECISION_PARTS = ("tokenizer", "encoder", "heads")
RUN_WIDE_KEYS = ("remat", "precision")  # keys of config.model that reference top-level keys


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Every architecture / curriculum value of `config.model` (Table 6 = globalsplat_16k)."""

    num_latents: int = 2048            # M latent scene tokens
    dim_latents: int = 512             # d
    dim_rgb: int = 512                 # RGB token width
    dim_rays: int = 256                # Plücker / camera token width (eq. 6)
    patch_size: int = 8
    rounds: int = 4                    # B encoder blocks
    self_attention_per_round: int = 2  # L
    num_heads: int = 8
    num_candidates: int = 16           # K_s candidates per token
    gaussians_per_token: int = 8       # 2^final_stage
    sh_degree: int = 3
    mean_offset: tuple = (0.0, 0.0, 1.5)
    log_scale_offset: float = -2.0
    # s_max of eq. 46 in canonical units (official 0.05, tuned for 16K Gaussians per scene); the
    # decoder clamps log-scales at log(s_max) + 2. A model with far fewer Gaussians needs larger ones.
    scale_max: float = SCALE_MAX
    opacity_offset: float = -5.0
    single_stream: bool = False        # Table 5 "single-stream"
    camera_code: bool = True           # False: Table 5 "Plücker only"
    curriculum: bool = True            # False: Table 5 "direct full-capacity prediction"
    # Stage s starts at stage_boundaries[s-1] (eq. 35 table); the 4th value (ours) only matters for
    # gaussians_per_token=16.
    stage_boundaries: tuple = (10_000, 20_000, 50_000, 80_000)
    stage_ramp_steps: int = 2_000
    gate_tau: float = 1.0
    eval_full_capacity: bool = True    # evaluation (train=False) decodes the final stage (official)
    # "none": trust the data to be in GlobalSplat's canonical frame (the official setup, with
    # `data.scene_frame="globalsplat"`: the union of context and target cameras normalised);
    # "context": the model canonicalises the context cameras itself (eqs. 3-5) and returns the
    # Gaussians in the input frame with SH rotated (works on any camera input; the tiny preset).
    normalize_scene: str = "none"
    attention_impl: str = "xla"        # "cudnn": fused flash attention on NVIDIA GPUs (bf16)
    # Queries per attention chunk on the XLA path (exact; bounds the [B, H, chunk, tokens] logits,
    # which unchunked are 1.08 GB per cross-attention at 16k); 0: unchunked. Ignored by "cudnn".
    attention_query_chunk: int = 256


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """`config.loss`: the official objective (`model_wrapper.py`, `config/loss/default.yaml`; see
    `losses.py` for the terms). Per subset: 2 MSE + 1 perceptual (w_rgb 2 x (w_mse 1 MSE + perc_w 0.5
    perceptual)) + 1e-2 frustum + 1e-2 decoder reg; lengths in canonical units."""

    mse_weight: float = 2.0
    # VGG perceptual loss with its pixel L1 term (`locojax.losses.perceptual`), weight w_rgb x perc_w.
    perceptual_weight: float = 1.0
    # "vgg19": the official trunk with the user's torchvision vgg19 file `vgg19_weights` (without one,
    # the bundled LPIPS VGG-16 trunk at the same taps is used instead, and a warning says so);
    # "vgg16_lpips": that substitute explicitly; "pixel_l1": departure, the pixel L1 term e0 alone
    # (no VGG: cheap on a CPU).
    perceptual_net: str = "vgg19"
    vgg19_weights: str = ""            # path of a torchvision vgg19 state_dict (.pth/.pt/.npz)
    lpips_weight: float = 0.0          # departure (LPIPS-VGG16, not in the official objective)
    frustum_weight: float = 1e-2
    frustum_tau: float = 10.0
    # Far bound of eq. 42 in world units: official (metric_scale 10 / scene_scale) x 4 canonical units
    # (`model_wrapper.py:643-644`), i.e. 40 world units. The near bound is 1e-2 canonical.
    frustum_max_depth: float = 40.0
    decoder_weight: float = 1e-2       # on scale + rotation + SH (eqs. 46-48)
    opacity_weight: float = 0.0        # eq. 44: paper only, not in the official code (switch; off)
    alpha_max: float = 0.2
    consistency: bool = True           # False: Table 5's "w/o consistency loss"
    consistency_alpha_weight: float = 1e-3
    consistency_depth_weight: float = 1e-2  # on depths in canonical units
    consistency_support: float = 1e-2


def model_config_from(model_cfg) -> ModelConfig:
    return from_mapping(ModelConfig, model_cfg, "model", extra_keys=RUN_WIDE_KEYS)


def loss_config_from(loss_cfg) -> LossConfig:
    return from_mapping(LossConfig, loss_cfg, "loss")


def precision_policy_from(config) -> PrecisionPolicy:
    """`config.precision` (run-wide) with `config.model.precision.<part>` overrides."""
    parts = dict(config.model.get("precision", None) or {})
    unknown = sorted(set(parts) - set(PRECISION_PARTS))
    if unknown:
        raise ValueError(f"config.model.precision has unknown part(s) {unknown}; parts: {PRECISION_PARTS}")
    return PrecisionPolicy.from_config(parts, default=str(config.get("precision", "float32")))


def final_stage_of(m: ModelConfig) -> int:
    g = m.gaussians_per_token
    stage = int(round(math.log2(g))) if g > 0 else -1
    if g <= 0 or (1 << stage) != g:
        raise ValueError(f"config.model.gaussians_per_token={g} must be a power of two")
    if g > m.num_candidates:
        raise ValueError(f"config.model.gaussians_per_token={g} exceeds num_candidates={m.num_candidates}")
    return stage
