"""The depth branch's configuration and output (the interface the LoCoSplat model calls).

Defaults are LoCoSplat's 6-view model (paper sec. 2.1, B.1);
values the paper does not state are VolSplat's official command (marked [inf]). Tiny presets override
widths in `configs/locosplat.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import flax.struct
import jax

# DINOv2 trunks: (embed_dim, heads, blocks, tapped layers). "tiny" is the fixtures' trunk: DINOv2('vitb')
# settings with embed_dim 64 and 4 heads (tests/fixtures/depth_anything_v2/README.md).
TRUNKS = {
    "vitb": (768, 12, 12, (2, 5, 8, 11)),
    "vits": (384, 6, 12, (2, 5, 8, 11)),
    "tiny": (64, 4, 12, (2, 5, 8, 11)),
}

# Which convolutions of the regressor are depthwise-separable (3x3 depthwise + 1x1 pointwise). The
# paper (sec. 2.1, B.1) says only "depthwise-separable, half-width"; which convs, it does not say.
#   "unet" (default): every 3x3 conv inside the regressor UNet (res blocks, down/up-sampling convs, its
#       output conv); the regressor's input / output 3x3 convs, the 1x1 residual and the depth head stay
#       dense. Chosen because it lands the model's trainable count on B.1's 12.5M: depth branch
#       12.05M + ~0.23M for the rest (Gaussian regressor, W0/W1, g, h) = 12.28M (-1.8%); separable
#       everywhere in the regressor gives 11.56M (-7%), dense half-width 13.49M (+10%).
#   "regressor": additionally the regressor's input and output 3x3 convs.
#   "none": all dense (DepthSplat / VolSplat, and the official fixtures).
DW_SEPARABLE_CHOICES = ("none", "unet", "regressor")


@dataclasses.dataclass(frozen=True)
class DepthBranchConfig:
    # Compute dtype of the image side (DINOv2 trunk, CNN, multi-view transformer): "bfloat16" or
    # "float16" as the paper deploys it (B.1); the cost volume / warping, regressor, DPT heads and all
    # outputs stay float32.
    image_dtype: str = "float32"

    # Cost volume (sec. 2.1): D candidates linear in inverse depth over [1/far, 1/near] at scale 0,
    # D / 4 local candidates at each later scale (DepthSplat `MultiViewUniMatch`).
    num_candidates: int = 64
    num_scales: int = 2  # [inf] VolSplat's command: num_scales=2, upsample_factor=2, lowest res 1/4
    near: float = 0.5  # defaults of the dataset's near/far (the branch uses the near/far it is given)
    far: float = 100.0
    num_neighbours: int = 2  # cross-attention / cost volume against the 2 nearest cameras (sec. 2.1)

    # Monocular trunk (DepthAnythingV2 DINOv2), frozen unless trunk_trainable.
    trunk: str = "vitb"
    trunk_trainable: bool = False
    trunk_weights: str = ""  # run dir written by `python -m experiments.import_weights` (see require_trunk_weights)
    # Trainable per-tap projection of the trunk's tokens ("four trainable 768 -> 384 projections",
    # B.1); 0 = none (DepthSplat, and the single-scale fixture).
    mono_proj_dim: int = 384

    # UniMatch CNN + multi-view swin transformer (1/4 resolution).
    feature_channels: int = 128
    transformer_layers: int = 6
    transformer_heads: int = 1
    ffn_expansion: int = 4
    attn_splits: int = 2

    # Regressor (UNet with cross-view attention). VolSplat 128 at scale 0 (halved each scale);
    # LoCoSplat halves it (64) [inf] and makes it depthwise-separable.
    unet_channels: int = 64
    unet_channel_mult: Tuple[int, ...] = (1, 1, 1)
    unet_num_res_blocks: int = 1
    unet_attn_resolutions: Tuple[int, ...] = (4,)
    unet_head_channels: int = 32
    depthwise_separable: str = "unet"  # one of DW_SEPARABLE_CHOICES

    # DPT depth upsampler (ViT-S widths, sec. 2.1 [inf]) and the DPT feature head (64-d per pixel).
    upsampler_features: int = 32
    upsampler_out_channels: Tuple[int, ...] = (48, 96, 192, 384)
    feature_head_features: int = 64
    feature_head_out_channels: Tuple[int, ...] = (48, 96, 192, 384)

    def __post_init__(self):
        if self.trunk not in TRUNKS:
            raise ValueError(f"model.depth.trunk={self.trunk!r}: expected one of {sorted(TRUNKS)}")
        if self.depthwise_separable not in DW_SEPARABLE_CHOICES:
            raise ValueError(f"model.depth.depthwise_separable={self.depthwise_separable!r}: "
                             f"expected one of {DW_SEPARABLE_CHOICES}")
        if self.image_dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"model.depth.image_dtype={self.image_dtype!r}: expected float32, bfloat16 or float16")
        if self.num_scales not in (1, 2, 3):
            raise ValueError(f"model.depth.num_scales={self.num_scales}: expected 1, 2 or 3")
        if self.num_candidates % (4 ** (self.num_scales - 1)):
            raise ValueError(f"model.depth.num_candidates={self.num_candidates} must divide by "
                             f"4**(num_scales-1)")

    @property
    def trunk_dim(self) -> int:
        return TRUNKS[self.trunk][0]

    @property
    def mono_dim(self) -> int:
        """Channels of the monocular features the regressor and the DPT heads see."""
        return self.mono_proj_dim or self.trunk_dim

    @property
    def feature_dim(self) -> int:
        """Channels of `dpt_features` (the feature head's width)."""
        return self.feature_head_features

    @property
    def upsample_factor(self) -> int:
        """Factor from the last scale's resolution to full resolution (1/4 at scale 0, x2 per scale)."""
        return 4 // (2 ** (self.num_scales - 1))


class MissingTrunkWeights(ValueError):
    pass


def require_trunk_weights(cfg: DepthBranchConfig) -> None:
    """A pretrained-width trunk needs converted weights unless it is trained from scratch."""
    if cfg.trunk != "tiny" and not cfg.trunk_weights and not cfg.trunk_trainable:
        raise MissingTrunkWeights(
            f"model.depth.trunk={cfg.trunk!r} is frozen (paper sec. 2.1) but model.depth.trunk_weights is empty: "
            "convert DepthAnythingV2's checkpoint with `python -m experiments.import_weights --family=locosplat "
            "--kind=depth_anything_v2 --from=depth_anything_v2_vitb.pth --workdir=DIR`, then train with "
            "--init_from=DIR and model.depth.trunk_weights=DIR, "
            "or set model.depth.trunk_trainable=True to train the trunk from random init")


@flax.struct.dataclass
class DepthBranchOutput:
    """depth [B, V, H, W] final z-depth (metres); coarse_depth [B, V, H/4, W/4] scale-0 z-depth;
    dpt_features [B, V, H, W, feature_dim]; peak_prob [B, V, H, W, 1] (last scale's max matching
    probability, nearest-upsampled); match_prob0 [B, V, H/4, W/4, D] (scale-0 distribution, Table 13)."""

    depth: jax.Array
    coarse_depth: jax.Array
    dpt_features: jax.Array
    peak_prob: jax.Array
    match_prob0: jax.Array
