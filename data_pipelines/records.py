"""One scene record as the builders store it (numpy only: used inside spawned build workers)."""

from __future__ import annotations

import numpy as np


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
