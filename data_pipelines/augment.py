"""Training augmentations, each drawn once per sample and applied identically to every view
(multi-view consistent).

GlobalSplat's colour jitter and small crop (GlobalSplat appendix, "Training configuration").
Strengths are not given in the paper; ours: brightness/contrast/saturation 0.2, hue 0.02
(torchvision ColorJitter semantics), crop keeps 90-100% of each side.

TokenGS/LocusGS's random reflection (`reflect_views`, config.data.reflect_prob; 0.5 in their
training): the whole scene mirrored in the world x = 0 plane, which is the same as every image
flipped left-right with c2w <- R c2w R, R = diag(-1, 1, 1, 1), and cx mirrored.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]], np.float32)
_YIQ_INV = np.linalg.inv(_YIQ).astype(np.float32)
_GRAY = np.array([0.299, 0.587, 0.114], np.float32)


@dataclasses.dataclass(frozen=True)
class AugmentParams:
    brightness: float = 1.0
    contrast: float = 1.0
    saturation: float = 1.0
    hue: float = 0.0          # fraction of a full turn
    crop_scale: float = 1.0   # kept fraction of width and height
    crop_offset: tuple = (0.5, 0.5)


def sample_params(rng: np.random.Generator, strength: float = 0.2, hue: float = 0.02, min_crop: float = 0.9) -> AugmentParams:
    return AugmentParams(
        brightness=float(rng.uniform(1 - strength, 1 + strength)),
        contrast=float(rng.uniform(1 - strength, 1 + strength)),
        saturation=float(rng.uniform(1 - strength, 1 + strength)),
        hue=float(rng.uniform(-hue, hue)),
        crop_scale=float(rng.uniform(min_crop, 1.0)),
        crop_offset=(float(rng.random()), float(rng.random())),
    )


def crop_window(height: int, width: int, params: AugmentParams) -> tuple[int, int, int, int]:
    """(x0, y0, w, h) of the shared crop in an image of the given size."""
    w = max(1, round(width * params.crop_scale))
    h = max(1, round(height * params.crop_scale))
    x0 = round(params.crop_offset[0] * (width - w))
    y0 = round(params.crop_offset[1] * (height - h))
    return x0, y0, w, h


def _mix(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """x @ m.T over the colour axis, elementwise (BLAS on [..., 3] operands is slow when the CPU
    is oversubscribed)."""
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    return np.stack([m[i, 0] * r + m[i, 1] * g + m[i, 2] * b for i in range(m.shape[0])], axis=-1)


def colour_jitter(images: np.ndarray, params: AugmentParams) -> np.ndarray:
    """float32 [..., H, W, 3] in [0, 1] -> jittered, same parameters for every image."""
    x = images * np.float32(params.brightness)
    gray = _mix(x, _GRAY[None])  # [..., H, W, 1]
    gray_mean = gray.mean(axis=(-3, -2), keepdims=True)
    x = np.clip((x - gray_mean) * np.float32(params.contrast) + gray_mean, 0, 1)
    gray = _mix(x, _GRAY[None])
    x = np.clip(gray + (x - gray) * np.float32(params.saturation), 0, 1)
    if params.hue:
        a = 2 * np.pi * params.hue
        rot = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]], np.float32)
        x = _mix(x, _YIQ_INV @ rot @ _YIQ)
    return np.clip(x, 0.0, 1.0).astype(np.float32)


REFLECT = np.diag([-1.0, 1.0, 1.0, 1.0]).astype(np.float32)


def reflect_views(images: np.ndarray, intrinsics: np.ndarray, c2w: np.ndarray, depth=None):
    """The mirror image of a sample: images [V, H, W, 3] (and depth [V, H, W]) flipped left-right,
    normalized intrinsics [V, 3, 3] with cx -> 1 - cx (and the skew negated), c2w [V, 4, 4] ->
    R c2w R with R = diag(-1, 1, 1, 1).

    Why this is a consistent scene: a world point X seen by camera c2w at camera coordinates
    x = c2w^-1 X is, in the mirrored world R X, seen by R c2w R at R x = (-x, y, z), i.e. at
    u' = fx (-x / z) + (1 - cx) = 1 - u (normalized): the flipped pixel. R c2w R keeps det = +1 (a
    proper camera), which a plain R c2w would not."""
    K = intrinsics.copy()
    K[..., 0, 2] = 1.0 - K[..., 0, 2]
    K[..., 0, 1] = -K[..., 0, 1]
    out_c2w = (REFLECT @ c2w.astype(np.float32) @ REFLECT).astype(c2w.dtype)
    flip = lambda x: None if x is None else np.ascontiguousarray(x[:, :, ::-1])  # noqa: E731
    return flip(images), K, out_c2w, flip(depth)
