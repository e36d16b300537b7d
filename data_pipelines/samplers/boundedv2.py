"""VolSplat's `boundedv2` training sampler (ziplab/VolSplat src/dataset/view_sampler/
view_sampler_bounded_v2.py with config/dataset/view_sampler/boundedv2.yaml), re-implemented.

Context: a left frame and a right frame `gap` apart, gap ~ U{min, max} where (min, max) warms up
linearly from (15, 30) to (20, 50) over the first 1,000 steps (integer truncation, as upstream);
the gap is clamped to N - 1. Extra context views ("random" strategy): distinct frames strictly
between left and right, sorted. Targets: `num_target_views` frames uniform in [left, right] *with*
replacement (upstream `target_views_replace_sample: true`, `max_distance_to_context_views: 0`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from data_pipelines.samplers.selection import SceneTooShort, ViewSelection


@dataclasses.dataclass(frozen=True)
class BoundedV2Sampler:
    num_context_views: int = 6
    num_target_views: int = 8
    min_gap: int = 20
    max_gap: int = 50
    initial_min_gap: int = 15
    initial_max_gap: int = 30
    warm_up_steps: int = 1000
    name: str = "boundedv2"

    def gap_bounds(self, step: int) -> tuple[int, int]:
        """(min, max) context gap at training `step`: upstream `schedule()` (linear, int-truncated)."""
        if self.warm_up_steps <= 0:
            return self.min_gap, self.max_gap

        def schedule(initial, final):
            fraction = step / self.warm_up_steps
            return min(initial + int((final - initial) * fraction), final)

        return schedule(self.initial_min_gap, self.min_gap), schedule(self.initial_max_gap, self.max_gap)

    def sample(self, rng: np.random.Generator, num_frames: int, step: int = 0) -> ViewSelection:
        min_gap, max_gap = self.gap_bounds(step)
        max_gap = min(num_frames - 1, max_gap)
        if max_gap < min_gap or max_gap - 1 < self.num_context_views - 2:
            raise SceneTooShort(f"boundedv2 needs a context gap >= {max(min_gap, self.num_context_views - 1)} "
                                f"frames (step {step}) but the scene has {num_frames} frames")
        gap = int(rng.integers(min_gap, max_gap + 1))
        gap = max(gap, self.num_context_views - 1)
        left = int(rng.integers(0, num_frames - gap))
        right = left + gap
        target = rng.integers(left, right + 1, size=self.num_target_views)
        extra = np.sort(rng.choice(np.arange(left + 1, right), size=self.num_context_views - 2, replace=False))
        context = np.concatenate([[left], extra, [right]]) if self.num_context_views >= 2 else np.array([left])
        return ViewSelection(context.astype(np.int32), target.astype(np.int32))
