"""GlobalSplat's training sampler (paper, appendix "View sampling" and "Subset consistency loss").

A window of L ~ U{40, 220} frames (clamped to N - 1) starts at a uniform frame. We draw C + T
distinct frames uniformly from it, always including its two ends (the "minimum and maximum sampled
frames", which are the shared anchor context views); T targets are drawn uniformly from the interior
of that ordered sequence and the rest is context (default C = 13, T = 12).

The consistency loss's two context subsets (eqs. 38-40) are formed by the model from the context
views' frame indices (`locojax.models.globalsplat.subsets`), not here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from data_pipelines.samplers.selection import SceneTooShort, ViewSelection


@dataclasses.dataclass(frozen=True)
class GlobalSplatSampler:
    num_context_views: int = 13
    num_target_views: int = 12
    min_gap: int = 40
    max_gap: int = 220
    name: str = "globalsplat"

    def sample(self, rng: np.random.Generator, num_frames: int, step: int = 0) -> ViewSelection:
        total = self.num_context_views + self.num_target_views
        if num_frames < total:
            raise SceneTooShort(f"globalsplat needs {total} distinct frames, the scene has {num_frames}")
        length = int(rng.integers(self.min_gap, self.max_gap + 1))
        length = max(min(length, num_frames - 1), total - 1)
        start = int(rng.integers(0, num_frames - length))
        interior = np.sort(rng.choice(np.arange(start + 1, start + length), size=total - 2, replace=False))
        frames = np.concatenate([[start], interior, [start + length]])
        is_target = np.zeros(total, bool)
        is_target[1 + rng.choice(total - 2, size=self.num_target_views, replace=False)] = True
        target = rng.permutation(frames[is_target])
        context = frames[~is_target]
        return ViewSelection(context.astype(np.int32), target.astype(np.int32))
