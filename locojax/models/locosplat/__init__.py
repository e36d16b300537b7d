"""LoCoSplat (arXiv 2610.04351) in Flax: a DepthSplat-style two-scale depth branch (depth/), static voxel
anchors (anchors.py, voxels.py), the two-grid local average with a pointwise fusion MLP (stage3d.py),
a pointwise head and eq. 5 decoding (decode.py); one static-shape jitted encoder (network.py); the
trainer's GaussianModel (model.py).

    from locojax.models.locosplat import build
    model = build(config)          # config.model / config.loss from configs/locosplat.py

Precision: the depth branch's image side (trunk, CNN, multi-view transformer) computes in
`config.model.depth.image_dtype`; cost volume / warping, depth, the Gaussian regressor, anchors, the
3D stage and the head always compute in float32 (paper B.1).
"""

from __future__ import annotations

from locojax.models.locosplat.config import LossConfig, ModelConfig, loss_config_from, model_config_from
from locojax.models.locosplat.model import BACKBONE, LoCoSplatModel


def check_optimizer_groups(config, m: ModelConfig) -> None:
    """The frozen trunk (paper sec. 2.1) must be a frozen optimizer group (else AdamW's decoupled weight
    decay would still shrink it), and a trainable one must not be."""
    opt = config.get("optimizer", None)
    if opt is None:
        return
    frozen = BACKBONE in tuple(opt.get("frozen_groups", ()))
    if m.depth.trunk_trainable and frozen:
        raise ValueError("config.model.depth.trunk_trainable=True but config.optimizer.frozen_groups freezes "
                         f"{BACKBONE!r}: drop it (e.g. --config.optimizer.frozen_groups=frozen)")
    if not m.depth.trunk_trainable and not frozen:
        raise ValueError(f"config.model.depth.trunk_trainable=False (frozen trunk) but {BACKBONE!r} is not in "
                         "config.optimizer.frozen_groups: add it, or set model.depth.trunk_trainable=True")


def build(config) -> LoCoSplatModel:
    """The LoCoSplat GaussianModel for `config` (reads config.model, config.loss, config.data)."""
    m = model_config_from(config.model)
    check_optimizer_groups(config, m)
    data = config.get("data", None)
    shape = tuple(data.get("image_shape", ())) if data is not None else None
    views = data.get("num_context_views", None) if data is not None else None
    return LoCoSplatModel(m, loss_config_from(config.loss), shape or None, views)


__all__ = ["build", "LoCoSplatModel", "ModelConfig", "LossConfig", "check_optimizer_groups"]
