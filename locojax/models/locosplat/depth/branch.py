"""DepthBranch: the public entry point of LoCoSplat's depth branch (paper sec. 2.1). Filled in below."""

from __future__ import annotations

import flax.linen as nn

from locojax.models.locosplat.depth.config import DepthBranchConfig, DepthBranchOutput


class DepthBranch(nn.Module):
    """images [B, V, H, W, 3] in [0, 1], intrinsics [B, V, 3, 3] normalised by width/height,
    c2w [B, V, 4, 4] OpenCV, near/far [B, V] -> DepthBranchOutput."""

    cfg: DepthBranchConfig

    @nn.compact
    def __call__(self, images, intrinsics, c2w, near, far, *, train: bool) -> DepthBranchOutput:
        raise NotImplementedError("DepthBranch is being filled in (helper lcdepth)")
