"""Per-sample scene frames applied to whole batches (context and target cameras together).

`config.data.scene_frame`:
  * "none": cameras as stored (world units).
  * "globalsplat": GlobalSplat's official preprocessing (`dataset/preprocessing.py:to_model_batch`):
    each sample is normalised once, from the union of its context and (valid) target cameras, into
    the average-camera frame with translations divided by the constellation diameter
    (`locojax.geometry.scene_normalization.globalsplat_normalize`, eqs. 3-5). A model that trusts
    the frame (GlobalSplat's `model.normalize_scene="none"`) then renders in canonical units, as the
    official code does. near/far are divided by the same scale. PSNR and the baselines are unchanged
    (a similarity transform of all cameras moves no pixel).
"""

from __future__ import annotations

import numpy as np

from locojax.geometry.scene_normalization import globalsplat_normalize
from locojax.types import Batch

SCENE_FRAMES = ("none", "globalsplat")


def check_scene_frame(name: str) -> str:
    if name not in SCENE_FRAMES:
        raise ValueError(f"config.data.scene_frame={name!r}: expected one of {SCENE_FRAMES}")
    return name


def apply_scene_frame(batch: Batch, name: str) -> Batch:
    """numpy Batch [B, V, ...] -> the same batch with every sample's cameras in its scene frame.
    Target views with index -1 (evaluation padding) are moved along but do not define the frame."""
    if check_scene_frame(name) == "none":
        return batch
    ctx, tgt = batch.context, batch.target
    c2w_c, c2w_t = np.array(ctx.c2w, np.float32), np.array(tgt.c2w, np.float32)
    near_c, far_c = np.array(ctx.near, np.float32), np.array(ctx.far, np.float32)
    near_t, far_t = np.array(tgt.near, np.float32), np.array(tgt.far, np.float32)
    depth_c = None if ctx.depth is None else np.array(ctx.depth, np.float32)
    depth_t = None if tgt.depth is None else np.array(tgt.depth, np.float32)
    for b in range(c2w_c.shape[0]):
        valid = np.asarray(tgt.index[b]) >= 0
        norm = globalsplat_normalize(np.concatenate([c2w_c[b], c2w_t[b][valid]]))
        inv = np.linalg.inv(norm.frame_c2w.astype(np.float64))
        for c2w, near, far in ((c2w_c, near_c, far_c), (c2w_t, near_t, far_t)):
            moved = inv[None] @ c2w[b].astype(np.float64)
            moved[:, :3, 3] /= norm.scale
            c2w[b] = moved.astype(np.float32)
            near[b] /= norm.scale
            far[b] /= norm.scale
        for depth in (depth_c, depth_t):  # z-depth is in the same units as the camera centres
            if depth is not None:
                depth[b] /= norm.scale
    return batch.replace(context=ctx.replace(c2w=c2w_c, near=near_c, far=far_c, depth=depth_c),
                         target=tgt.replace(c2w=c2w_t, near=near_t, far=far_t, depth=depth_t))
