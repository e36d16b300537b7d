"""What every training view sampler returns, and the error for a scene too short for it."""

from __future__ import annotations

import dataclasses

import numpy as np


class SceneTooShort(ValueError):
    """The scene has fewer frames than the sampler needs."""


@dataclasses.dataclass(frozen=True)
class ViewSelection:
    context: np.ndarray                 # int32 [C], sorted
    target: np.ndarray                  # int32 [T]
