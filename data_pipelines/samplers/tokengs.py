"""TokenGS's static-scene training sampler (nv-tlabs/TokenGS tokengs/data/provider.py
`_get_indices_static`, gaps from tokengs/data/registry.py), re-implemented; LocusGS trains with it
(2 input views on RealEstate10K, 4 on DL3DV; TokenGS's num_views = 8 frames in total).

gap ~ U{10, 40}, clamped to [C - 1, N - 1] (and to >= T - 1 so that T distinct targets exist);
context = start, C - 2 sorted distinct frames strictly inside, start + gap; targets = T distinct
frames drawn from [start, start + gap] (they may coincide with context frames, as upstream).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from data_pipelines.samplers.selection import SceneTooShort, ViewSelection


@dataclasses.dataclass(frozen=True)
class TokenGSSampler:
    num_context_views: int = 2
    num_target_views: int = 6
    min_gap: int = 10
    max_gap: int = 40
    name: str = "tokengs"

    def sample(self, rng: np.random.Generator, num_frames: int, step: int = 0) -> ViewSelection:
        need = max(self.num_context_views, self.num_target_views)
        if num_frames < need:
            raise SceneTooShort(f"tokengs needs {need} frames, the scene has {num_frames}")
        gap = int(rng.integers(self.min_gap, self.max_gap + 1))
        gap = max(min(num_frames - 1, gap), self.num_context_views - 1, self.num_target_views - 1)
        start = int(rng.integers(0, num_frames - gap))
        inner = np.sort(rng.permutation(np.arange(start + 1, start + gap))[: self.num_context_views - 2])
        context = np.concatenate([[start], inner, [start + gap]])[: max(self.num_context_views, 1)]
        target = rng.permutation(np.arange(start, start + gap + 1))[: self.num_target_views]
        return ViewSelection(context.astype(np.int32), target.astype(np.int32))
