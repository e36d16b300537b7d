"""Training view samplers (the papers' protocols). `data_pipelines.registry.make_sampler(name, ...)`
picks one by config name (`registry.SAMPLERS`).

Every sampler maps (rng, number of frames, training step) to frame indices:
`ViewSelection(context [C], target [T])`, both int32, context sorted. (A model that trains on
subsets of the context, e.g. GlobalSplat's consistency loss, forms them itself from `Views.index`.)
A scene too short for a sampler raises `SceneTooShort` (the iterator counts and skips it).
"""

from data_pipelines.samplers.selection import SceneTooShort, ViewSelection

__all__ = ["SceneTooShort", "ViewSelection"]
