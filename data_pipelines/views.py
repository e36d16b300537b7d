"""Decode, crop (pixelSplat shim) and optionally augment the selected frames of one scene."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
from PIL import Image

from data_pipelines import augment as aug
from data_pipelines.crop import crop_region, principal_point_crop, rescale_and_crop, resize_depth
from data_pipelines.storage import SceneSource, _text


class PreparedViews(NamedTuple):
    images: np.ndarray             # float32 [V, H, W, 3] in [0, 1]
    intrinsics: np.ndarray         # float32 [V, 3, 3] normalized
    c2w: np.ndarray                # float32 [V, 4, 4]
    depth: Optional[np.ndarray]    # float32 [V, H, W] z-depth, 0 = unknown; None unless asked for


def prepare_views(record: dict, frames: np.ndarray, image_shape, params=None, pre_resize=None,
                  centre_principal_point: bool = False, with_depth: bool = False) -> PreparedViews:
    """Frames of `record` -> PreparedViews (images, intrinsics, c2w, depth).

    `params` (`augment.AugmentParams`, one per sample): the same crop window and colour jitter for
    every view. `pre_resize` (H, W): resize first with PIL's default filter, as FreeSplat does for
    ScanNet (normalized intrinsics are unchanged by a resize). `centre_principal_point`: first
    crop the largest rectangle centred on (cx, cy) (GlobalSplat's training preprocessing).
    `with_depth`: also decode the stored depth maps and put them through the same geometric steps
    (a depth map of another resolution is first resized to its frame's; resizes are nearest
    neighbour, colour jitter does not apply); a scene without depth raises ValueError naming it.
    """
    n = len(record["images"])
    if frames.size and (frames.min() < 0 or frames.max() >= n):
        raise IndexError(f"frame indices {frames.tolist()} out of range for a scene with {n} frames")
    raw = SceneSource.decode_frames(record, frames)
    depths = [None] * len(frames)
    if with_depth:
        decoded = SceneSource.decode_depth(record, frames)
        if decoded is None:
            raise ValueError(f"config.data.load_depth=True but scene {_text(record['key'])!r} has no stored depth "
                             "(datasets with depth: synthetic, scannet)")
        depths = list(decoded)
    K_all = np.asarray(record["intrinsics"], np.float32)[frames]
    c2w = np.asarray(record["c2w"], np.float32)[frames]
    images, Ks, out_depth = [], [], []
    for img, K, depth in zip(raw, K_all, depths):
        if pre_resize is not None and img.shape[:2] != tuple(pre_resize):
            img = np.asarray(Image.fromarray(img).resize((pre_resize[1], pre_resize[0])))
        if depth is not None:
            depth = resize_depth(np.asarray(depth, np.float32), img.shape[:2])
        if centre_principal_point:
            if depth is not None:
                depth, _ = principal_point_crop(depth, K)
            img, K = principal_point_crop(img, K)
        if params is not None and params.crop_scale < 1.0:
            x0, y0, w, h = aug.crop_window(img.shape[0], img.shape[1], params)
            if depth is not None:
                depth, _ = crop_region(depth, K, x0, y0, w, h)
            img, K = crop_region(img, K, x0, y0, w, h)
        if depth is not None:
            depth, _ = rescale_and_crop(np.ascontiguousarray(depth), K, tuple(image_shape))
            out_depth.append(depth)
        img, K = rescale_and_crop(np.ascontiguousarray(img), K, tuple(image_shape))
        images.append(img)
        Ks.append(K)
    images = np.stack(images).astype(np.float32) / np.float32(255.0)
    if params is not None:
        images = aug.colour_jitter(images, params)
    depth = np.stack(out_depth).astype(np.float32) if with_depth else None
    return PreparedViews(images, np.stack(Ks).astype(np.float32), c2w, depth)
