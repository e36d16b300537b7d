"""A tiny posed-views batch built here (no data pipeline): cameras on an arc looking at a coloured
scene of random Gaussians rendered with the dense reference rasterizer, in GlobalSplat's canonical
frame. Used by the GlobalSplat tests only."""

from __future__ import annotations

import numpy as np

from locojax.geometry.scene_normalization import globalsplat_normalize
from locojax.types import Batch, Views


def look_at_c2w(centre, target, up=(0.0, -1.0, 0.0)):
    """OpenCV c2w for a camera at `centre` looking at `target` (y down)."""
    centre, target, up = (np.asarray(x, np.float64) for x in (centre, target, up))
    z = target - centre
    z /= np.linalg.norm(z)
    x = np.cross(up, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    c2w = np.eye(4)
    c2w[:3, :3] = np.stack([x, y, z], axis=-1)
    c2w[:3, 3] = centre
    return c2w


def arc_cameras(num: int, radius: float = 3.0, spread: float = 0.6, seed: int = 0):
    rng = np.random.default_rng(seed)
    angles = np.linspace(-spread, spread, num) + rng.normal(0, 0.02, num)
    out = []
    for a in angles:
        centre = np.array([radius * np.sin(a), rng.normal(0, 0.05), -radius * np.cos(a) + radius])
        out.append(look_at_c2w(centre, np.array([0.0, 0.0, radius])))
    return np.stack(out).astype(np.float32)


def random_views(batch: int, num_views: int, height: int, width: int, seed: int = 0) -> Views:
    """Random images with arc cameras (canonical frame), normalised intrinsics, frame indices."""
    rng = np.random.default_rng(seed)
    c2w = np.stack([globalsplat_normalize(arc_cameras(num_views, seed=seed + b)).c2w for b in range(batch)])
    K = np.tile(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (batch, num_views, 1, 1))
    return Views(
        images=rng.uniform(0, 1, (batch, num_views, height, width, 3)).astype(np.float32),
        intrinsics=K, c2w=c2w.astype(np.float32),
        near=np.full((batch, num_views), 0.1, np.float32), far=np.full((batch, num_views), 100.0, np.float32),
        index=np.tile(np.arange(num_views, dtype=np.int32) * 3, (batch, 1)),
    )


def split_batch(views: Views, num_context: int) -> Batch:
    """Every other view is a target until `num_context` context views remain (sorted by index)."""
    v = views.images.shape[1]
    target_idx = [i for i in range(1, v - 1, 2)][: v - num_context]
    context_idx = [i for i in range(v) if i not in target_idx]
    take = lambda idx: Views(*(np.asarray(getattr(views, f))[:, idx] for f in  # noqa: E731
                                ("images", "intrinsics", "c2w", "near", "far", "index")))
    return Batch(context=take(context_idx), target=take(target_idx),
                 scene_id=np.arange(views.images.shape[0], dtype=np.int32))
