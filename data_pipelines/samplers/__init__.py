"""Training view samplers (the papers' protocols). `make_sampler(name, ...)` picks one by config name
(`registry.SAMPLERS`).

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
    """The sampler called `name` (a key of `registry.SAMPLERS`) with paper defaults; view counts left
    None take the dataset's (`DatasetSpec.sampler_views`), else the sampler's own."""
    from data_pipelines.registry import DATASET_SPECS, SAMPLERS

    if name not in SAMPLERS:
        raise ValueError(f"config.data.sampler={name!r}: expected one of {', '.join(map(repr, SAMPLERS))}")
    kwargs = {k: v for k, v in dict(num_context_views=num_context_views, num_target_views=num_target_views,
                                    min_gap=min_gap, max_gap=max_gap).items() if v is not None}
    spec = DATASET_SPECS.get(dataset)
    views = spec.sampler_views.get(name) if spec is not None else None
    if views is not None:
        kwargs.setdefault("num_context_views", views[0])
        kwargs.setdefault("num_target_views", views[1])
    return SAMPLERS[name](**kwargs)
