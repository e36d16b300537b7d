"""The per-scene TFDS record shared by every builder (one example = one whole video).

Frames are stored as encoded bytes (decoded lazily, only for the views a sampler picks); cameras are
stored already converted to the locojax convention (normalized intrinsics, OpenCV c2w), so the
readers need no format knowledge.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds


def scene_features() -> tfds.features.FeaturesDict:
    return tfds.features.FeaturesDict({
        "key": tfds.features.Text(),
        "url": tfds.features.Text(),
        "images": tfds.features.Tensor(shape=(None,), dtype=tf.string),       # encoded JPEG/PNG
        "intrinsics": tfds.features.Tensor(shape=(None, 3, 3), dtype=np.float32),
        "c2w": tfds.features.Tensor(shape=(None, 4, 4), dtype=np.float32),
        "timestamps": tfds.features.Tensor(shape=(None,), dtype=np.int64),
        "depth": tfds.features.Tensor(shape=(None,), dtype=tf.string),        # 16-bit PNG or empty
        "depth_units_per_metre": tfds.features.Scalar(dtype=np.float32),
    })


def make_record(key, images, intrinsics, c2w, timestamps, url="", depth=(), depth_units_per_metre=0.0) -> dict:
    """Validate shapes and assemble one example dict."""
    n = len(images)
    intrinsics = np.asarray(intrinsics, np.float32).reshape(-1, 3, 3)
    c2w = np.asarray(c2w, np.float32).reshape(-1, 4, 4)
    timestamps = np.asarray(timestamps, np.int64).reshape(-1)
    if not (intrinsics.shape[0] == c2w.shape[0] == timestamps.shape[0] == n):
        raise ValueError(f"scene {key!r}: {n} frames but {intrinsics.shape[0]} intrinsics, "
                         f"{c2w.shape[0]} poses, {timestamps.shape[0]} timestamps")
    if len(depth) not in (0, n):
        raise ValueError(f"scene {key!r}: {len(depth)} depth maps for {n} frames")
    if not np.isfinite(c2w).all() or not np.isfinite(intrinsics).all():
        raise ValueError(f"scene {key!r}: non-finite camera values")
    return {
        "key": key, "url": url,
        "images": np.array(list(images), dtype=object),
        "intrinsics": intrinsics, "c2w": c2w, "timestamps": timestamps,
        "depth": np.array(list(depth), dtype=object),
        "depth_units_per_metre": np.float32(depth_units_per_metre),
    }
