"""`Scene`: one video of posed frames, as `load_scenes` returns it."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np


@dataclasses.dataclass
class Scene:
    """A posed image sequence.

    Attributes:
      key:        scene key (e.g. RealEstate10K's 16-hex id, "scene0553_00", "synthetic_test_00003").
      images:     uint8 [N, H, W, 3], frames in timestamp order.
      intrinsics: float32 [N, 3, 3], normalized (fx / W, cx / W; fy / H, cy / H).
      c2w:        float32 [N, 4, 4], OpenCV camera-to-world.
      timestamps: int64 [N].
      depth:      optional float32 [N, H, W] z-depth in metres (synthetic, ScanNet); 0 = no depth.
      url:        source video URL where the format has one, else "".
    """

    key: str
    images: np.ndarray
    intrinsics: np.ndarray
    c2w: np.ndarray
    timestamps: np.ndarray
    depth: Optional[np.ndarray] = None
    url: str = ""

    @property
    def num_frames(self) -> int:
        return int(self.images.shape[0])
