"""Decode, crop (pixelSplat shim) and optionally augment the selected frames of one scene."""

from __future__ import annotations

import numpy as np
from PIL import Image

from data_pipelines import augment as aug
from data_pipelines.crop import crop_region, principal_point_crop, rescale_and_crop
from data_pipelines.storage import SceneSource


def prepare_views(record: dict, frames: np.ndarray, image_shape, params=None, pre_resize=None,
                  centre_principal_point: bool = False):
    """Frames of `record` -> (images float32 [V, H, W, 3] in [0, 1], intrinsics [V, 3, 3], c2w [V, 4, 4]).

    `params` (`augment.AugmentParams`, one per sample): the same crop window and colour jitter for
    every view. `pre_resize` (H, W): resize first with PIL's default filter, as FreeSplat does for
    ScanNet (normalized intrinsics are unchanged by a resize). `centre_principal_point`: first
    crop the largest rectangle centred on (cx, cy) (GlobalSplat's training preprocessing).
    """
    n = len(record["images"])
    if frames.size and (frames.min() < 0 or frames.max() >= n):
        raise IndexError(f"frame indices {frames.tolist()} out of range for a scene with {n} frames")
    raw = SceneSource.decode_frames(record, frames)
    K_all = np.asarray(record["intrinsics"], np.float32)[frames]
    c2w = np.asarray(record["c2w"], np.float32)[frames]
    images, Ks = [], []
    for img, K in zip(raw, K_all):
        if pre_resize is not None and img.shape[:2] != tuple(pre_resize):
            img = np.asarray(Image.fromarray(img).resize((pre_resize[1], pre_resize[0])))
        if centre_principal_point:
            img, K = principal_point_crop(img, K)
        if params is not None and params.crop_scale < 1.0:
            x0, y0, w, h = aug.crop_window(img.shape[0], img.shape[1], params)
            img, K = crop_region(img, K, x0, y0, w, h)
        img, K = rescale_and_crop(np.ascontiguousarray(img), K, tuple(image_shape))
        images.append(img)
        Ks.append(K)
    images = np.stack(images).astype(np.float32) / np.float32(255.0)
    if params is not None:
        images = aug.colour_jitter(images, params)
    return images, np.stack(Ks).astype(np.float32), c2w
