"""pixelSplat's crop shim (dcharatan/pixelsplat src/dataset/shims/crop_shim.py), re-implemented in
numpy/PIL: resize with LANCZOS so the image *covers* the target size (scale = max(h_out / h_in,
w_out / w_in), rounded sizes), centre-crop, update the normalized intrinsics.

Intrinsics: fx *= w_scaled / w_out, fy *= h_scaled / h_out as upstream; the principal point is
updated exactly, cx' = (cx * w_scaled - col) / w_out (upstream leaves cx, cy unchanged, which is the
same value when cx = 0.5 and the crop margin is even, and off by half a pixel otherwise).
"""

from __future__ import annotations

import numpy as np
from PIL import Image


def crop_region(image: np.ndarray, K_norm: np.ndarray, x0: int, y0: int, w: int, h: int):
    """Crop [H, W, ...] (uint8 colour or float32 depth) to [y0:y0+h, x0:x0+w] and update normalized
    intrinsics [3, 3]."""
    H, W = image.shape[:2]
    K = np.array(K_norm, np.float64)
    K[0, 0] *= W / w
    K[1, 1] *= H / h
    K[0, 2] = (K[0, 2] * W - x0) / w
    K[1, 2] = (K[1, 2] * H - y0) / h
    return image[y0:y0 + h, x0:x0 + w], K.astype(np.float32)


def resize_depth(depth: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """float32 [H, W] -> [h, w] by nearest neighbour (interpolating across a depth edge would invent
    surfaces; 0 = unknown stays 0)."""
    if depth.shape[:2] == tuple(shape):
        return depth
    img = Image.fromarray(np.ascontiguousarray(depth, np.float32), mode="F")
    return np.asarray(img.resize((shape[1], shape[0]), Image.NEAREST), np.float32)


def rescale_and_crop(image: np.ndarray, K_norm: np.ndarray, shape: tuple[int, int]):
    """uint8 [H, W, 3] (LANCZOS) or float32 depth [H, W] (nearest), normalized K [3, 3] ->
    [h_out, w_out, ...], updated K (float32)."""
    h_in, w_in = image.shape[:2]
    h_out, w_out = shape
    if (h_in, w_in) == (h_out, w_out):
        return image, np.asarray(K_norm, np.float32)
    scale = max(h_out / h_in, w_out / w_in)
    h_s, w_s = round(h_in * scale), round(w_in * scale)
    if (h_s, w_s) != (h_in, w_in):
        if image.dtype == np.uint8:
            image = np.asarray(Image.fromarray(image).resize((w_s, h_s), Image.LANCZOS))
        else:
            image = resize_depth(image, (h_s, w_s))
    # Resizing keeps normalized intrinsics unchanged; only the crop changes them.
    row, col = (h_s - h_out) // 2, (w_s - w_out) // 2
    return crop_region(image, K_norm, col, row, w_out, h_out)


def principal_point_crop(image: np.ndarray, K_norm: np.ndarray):
    """GlobalSplat's first training step: the largest crop centred on the principal point, so that
    afterwards cx = cy = 0.5 (up to pixel rounding). uint8 [H, W, 3], K [3, 3] -> cropped, K'."""
    H, W = image.shape[:2]
    cx, cy = float(K_norm[0, 2]) * W, float(K_norm[1, 2]) * H
    half_w = int(np.floor(min(cx, W - cx) + 1e-3))  # tolerate float32 intrinsics
    half_h = int(np.floor(min(cy, H - cy) + 1e-3))
    if half_w < 1 or half_h < 1:
        raise ValueError(f"principal point ({cx:.1f}, {cy:.1f}) px lies outside a {W}x{H} image")
    x0, y0 = int(round(cx)) - half_w, int(round(cy)) - half_h
    x0, y0 = max(0, x0), max(0, y0)
    w, h = min(2 * half_w, W - x0), min(2 * half_h, H - y0)
    return crop_region(image, K_norm, x0, y0, w, h)
