"""Training view samplers (the papers' protocols). `make_sampler(name, ...)` picks one by config name.

Every sampler maps (rng, number of frames, training step) to frame indices:
`ViewSelection(context [C], target [T])`, both int32, context sorted. (A model that trains on
subsets of the context, e.g. GlobalSplat's consistency loss, forms them itself from `Views.index`.)
A scene too short for a sampler raises `SceneTooShort` (the iterator counts and skips it).
"""

from __future__ import annotations

import dataclasses
import numpy as np


class SceneTooShort(ValueError):
    """The scene has fewer frames than the sampler needs."""


@dataclasses.dataclass(frozen=True)
class ViewSelection:
    context: np.ndarray                 # int32 [C], sorted
    target: np.ndarray                  # int32 [T]


def make_sampler(name: str, *, dataset: str = "synthetic", num_context_views=None, num_target_views=None,
                 min_gap=None, max_gap=None):
    """The sampler called `name` ("boundedv2", "globalsplat", "tokengs") with paper defaults."""
    from data_pipelines.samplers.boundedv2 import BoundedV2Sampler
    from data_pipelines.samplers.globalsplat import GlobalSplatSampler
    from data_pipelines.samplers.tokengs import TokenGSSampler

    kwargs = {k: v for k, v in dict(num_context_views=num_context_views, num_target_views=num_target_views,
                                    min_gap=min_gap, max_gap=max_gap).items() if v is not None}
    if name == "boundedv2":
        return BoundedV2Sampler(**kwargs)
    if name == "globalsplat":
        return GlobalSplatSampler(**kwargs)
    if name == "tokengs":
        if dataset == "dl3dv":
            kwargs.setdefault("num_context_views", 4)
            kwargs.setdefault("num_target_views", 4)
        return TokenGSSampler(**kwargs)
    raise ValueError(f"config.data.sampler={name!r}: expected one of 'boundedv2', 'globalsplat', 'tokengs'")
