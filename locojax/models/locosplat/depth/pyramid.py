"""ViTFeaturePyramid (DepthSplat `unimatch/vit_fpn.py`, ViTDet's simple pyramid) for scale factors
[1, 2, ...]: x [N, h, w, C] -> [x, up2(x) [N, 2h, 2w, C/2], ...] (low to high resolution)."""

from __future__ import annotations

import flax.linen as nn

from locojax.models.common.layers import TorchConv, gelu
from locojax.models.locosplat.depth.dpt import ConvTranspose


class FeaturePyramid(nn.Module):
    num_scales: int

    @nn.compact
    def __call__(self, x):
        c = x.shape[-1]
        outs = [x]
        for i in range(1, self.num_scales):
            if i == 1:
                y = ConvTranspose(c // 2, 2, name="stages_1_0")(x)
                out = c // 2
                nxt = 1
            elif i == 2:
                y = gelu(ConvTranspose(c // 2, 2, name="stages_2_0")(x))
                y = ConvTranspose(c // 4, 2, name="stages_2_2")(y)
                out = c // 4
                nxt = 3
            else:
                raise ValueError("FeaturePyramid supports at most 3 scales")
            y = TorchConv(out, 3, 1, 1, name=f"stages_{i}_{nxt + 1}")(gelu(y))
            outs.append(y)
        return outs
