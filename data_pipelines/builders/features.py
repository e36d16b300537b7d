"""The per-scene TFDS record shared by every builder (one example = one whole video).

Frames are stored as encoded bytes (decoded lazily, only for the views a sampler picks); cameras are
stored already converted to the locojax convention (normalized intrinsics, OpenCV c2w), so the
readers need no format knowledge.
"""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds  # (np.object_ is its string dtype: reading needs no tensorflow import)


def scene_features() -> tfds.features.FeaturesDict:
    return tfds.features.FeaturesDict({
        "key": tfds.features.Text(),
        "url": tfds.features.Text(),
        "images": tfds.features.Tensor(shape=(None,), dtype=np.object_),      # encoded JPEG/PNG
        "intrinsics": tfds.features.Tensor(shape=(None, 3, 3), dtype=np.float32),
        "c2w": tfds.features.Tensor(shape=(None, 4, 4), dtype=np.float32),
        "timestamps": tfds.features.Tensor(shape=(None,), dtype=np.int64),
        "depth": tfds.features.Tensor(shape=(None,), dtype=np.object_),       # 16-bit PNG or empty
        "depth_units_per_metre": tfds.features.Scalar(dtype=np.float32),
    })
