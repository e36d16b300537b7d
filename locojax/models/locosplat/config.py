"""LoCoSplat's hyper-parameters, each default written once (the LoCoSplat paper = the 6-view model).

`ModelConfig` is `config.model` (its `depth` section is the depth branch's `DepthBranchConfig`,
depth/config.py) and `LossConfig` is `config.loss` (eq. 6). `configs/locosplat.py` builds ConfigDicts
from these dataclasses and presets change single values; `build(config)` reads them back through
`model_config_from` / `loss_config_from` (`locojax.models.common.config_mapping.from_mapping`), which
reject unknown keys naming the closest valid ones.
"""

from __future__ import annotations

import dataclasses

from locojax.models.common.config_mapping import from_mapping
from locojax.models.locosplat.depth.config import DepthBranchConfig

ACTIVATIONS = ("gelu", "relu")
FINE_INTERPS = ("nearest", "trilinear")  # model.fine_level_interp (stage3d.LocalContext.fine_interp)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    # Anchors (sec. 2.2, eq. 1): fine voxel size v (metres); round half to even.
    voxel_size: float = 0.001
    # Grid levels of the local average (sec. 2.3, B.1 "Grids"): cell sizes, the first = voxel_size
    # (u0 = W0 f_a read directly from the voxelisation), the others splatted (box kernel, nearest
    # cell). Table 12 ablations: (0.001,) one level; (0.001, 0.002, 0.004, 0.008) four; doubling to
    # 0.128 eight, to 2.048 twelve. g's input grows by proj_dim per level.
    grid_cell_sizes: tuple = (0.001, 0.128)
    proj_dim: int = 16               # W_l: 132 -> 16 with bias (4,256 parameters for two levels)
    fusion_hidden: int = 256         # g: (levels * 16 + 132) -> 256 -> 256 -> 132 (141,956)
    fusion: bool = True              # False: C.1's "no fusion MLP" ablation (f' = f)
    # Fine level (h0 = v) of the local average: "nearest" = W0 f_a straight from the voxelisation
    # (LoCoSplat, B.1); "trilinear" = Table 5's ablation, a tent-kernel splat of W0 f_i queried
    # trilinearly at the anchor, renormalised over occupied nodes (the ablation models' rule, B.1).
    fine_level_interp: str = "nearest"
    head_hidden: int = 38            # h: 132 -> 38 -> 38 pointwise, no bias (VolSplat head), 6,460
    # Activation of g and h: not stated in the paper; GELU as VolSplat's sparse head (MinkowskiGELU).
    activation: str = "gelu"
    regressor_channels: int = 64     # Gaussian regressor conv3x3 -> GELU -> conv3x3 (VolSplat, 64)
    # Decoding (eq. 5, VolSplat volsplat.yaml / gaussian_adapter_depth.py).
    sh_degree: int = 2
    scale_min: float = 1e-10
    scale_max: float = 3.0
    offset_voxels: float = 3.0       # mu = x_a + offset_voxels * v * (sigmoid(o) - 1/2): +-1.5 v
    # The coarse-depth Gaussian set G(D~) (eq. 6, beta term) rendered during training.
    coarse_set: bool = True
    remat: bool = False              # rematerialise the depth branch (12/24-view training, sec. 2.5)
    depth: DepthBranchConfig = DepthBranchConfig()

    def __post_init__(self):
        if self.fine_level_interp not in FINE_INTERPS:
            raise ValueError(f"config.model.fine_level_interp={self.fine_level_interp!r}: expected one of {FINE_INTERPS}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"config.model.activation={self.activation!r}: expected one of {ACTIVATIONS}")
        if not self.grid_cell_sizes or abs(self.grid_cell_sizes[0] - self.voxel_size) > 1e-12:
            raise ValueError(f"config.model.grid_cell_sizes={self.grid_cell_sizes}: the first level must be the "
                             f"voxel size {self.voxel_size} (the fine level is the voxelisation itself, sec. 2.3)")
        if self.sh_degree != 2:
            raise ValueError("config.model.sh_degree: LoCoSplat's head emits degree-2 SH (27 values, eq. 5)")

    @property
    def feature_dim(self) -> int:
        """Per-pixel f: [regressor; RGB 3; DPT features; peak probability 1] (132 at paper widths)."""
        return self.regressor_channels + 3 + self.depth.feature_dim + 1

    @property
    def raw_dim(self) -> int:
        """h's output: [alpha 1 | offset 3 | scale 3 | quaternion 4 | SH 3 x (sh_degree + 1)^2]."""
        return 11 + 3 * (self.sh_degree + 1) ** 2


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Eq. 6 (the LoCoSplat paper; the DepthSplat / VolSplat recipe): l(G(D)) + coarse_weight * l(G(D~)), the
    final set's loss plus that of the coarse-depth Gaussian set, l = mse_weight * MSE + lpips_weight *
    LPIPS-VGG (normalize=True). Each weight multiplies a family-neutral term of `locojax.losses`."""

    mse_weight: float = 1.0
    lpips_weight: float = 0.05   # lambda
    coarse_weight: float = 0.9   # beta: the coarse-depth set G(D~)


def model_config_from(model_cfg) -> ModelConfig:
    return from_mapping(ModelConfig, model_cfg, "model", nested={"depth": DepthBranchConfig})


def loss_config_from(loss_cfg) -> LossConfig:
    return from_mapping(LossConfig, loss_cfg, "loss")
