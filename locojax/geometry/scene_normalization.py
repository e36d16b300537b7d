"""Scene normalisations: similarity transforms that put a scene's cameras into a canonical frame.

All functions take one scene's camera-to-world matrices `c2w` [V, 4, 4] (OpenCV axes, numpy or
anything numpy can read) and return a `SceneNormalization`: the normalised cameras plus the
similarity (`frame_c2w`, `scale`) that maps canonical coordinates back to the world:

    x_world = frame_c2w[:3, :3] @ (scale * x_canonical) + frame_c2w[:3, 3]

Three normalisations:

* `globalsplat_normalize` - GlobalSplat's canonical frame (paper sec. 3.2, eqs. 3-5; the official
  `scene_normalize_c2w`): the "average camera" (mean centre, averaged forward and down axes,
  re-orthonormalised) becomes the identity (eq. 3), then translations are divided by the camera
  constellation's diameter s = max_ab |o_a - o_b| (eqs. 4-5). The official code applies it to the
  union of context and target cameras of a training example; pass that union.
* `first_camera_normalize` - the NoPoSplat-style baseline: the first context camera becomes the
  identity and translations are divided by the distance between the first and last context camera.
* `metric_identity` - leaves the cameras as they are (scale 1), for metric datasets.

Everything is computed in float64 and returned in the input's dtype (float32 matches the official
float32 numpy code to ~1e-7).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SceneNormalization(NamedTuple):
    """A normalised scene and the similarity that undoes it.

    Attributes:
      c2w:       [V, 4, 4] normalised camera-to-world matrices.
      frame_c2w: [4, 4] rigid pose of the canonical frame in world coordinates.
      scale:     scalar float; canonical lengths times `scale` are world lengths.
    """

    c2w: np.ndarray
    frame_c2w: np.ndarray
    scale: float


def _check_c2w(c2w, name: str = "c2w") -> np.ndarray:
    c2w = np.asarray(c2w)
    if c2w.ndim != 3 or c2w.shape[-2:] != (4, 4):
        raise ValueError(f"{name} must be [V, 4, 4] camera-to-world matrices, got shape {c2w.shape}")
    if not np.all(np.isfinite(c2w)):
        raise ValueError(f"{name} contains non-finite values")
    return c2w


def _unit(v: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    # eps as in the official `_normalize_vector` (added to the norm, not a max).
    return v / (np.linalg.norm(v) + eps)


def _rigid_inverse(pose: np.ndarray) -> np.ndarray:
    out = np.eye(4, dtype=pose.dtype)
    rot_t = pose[:3, :3].T
    out[:3, :3] = rot_t
    out[:3, 3] = -rot_t @ pose[:3, 3]
    return out


def _apply_frame(c2w: np.ndarray, frame_c2w: np.ndarray, scale: float) -> np.ndarray:
    """Express `c2w` in `frame_c2w`, then divide translations by `scale`."""
    out = _rigid_inverse(frame_c2w)[None] @ c2w
    out[:, :3, 3] /= scale
    return out


def average_camera_pose(c2w) -> np.ndarray:
    """[V, 4, 4] -> [4, 4] the "average camera" of eq. 3: origin at the mean camera centre, z the
    normalised mean forward axis, x = normalise(mean_down x z), y = z x x (re-orthonormalised)."""
    c2w = _check_c2w(c2w).astype(np.float64)
    centre = c2w[:, :3, 3].mean(axis=0)
    forward = _unit(c2w[:, :3, 2].mean(axis=0))
    down = c2w[:, :3, 1].mean(axis=0)
    right = _unit(np.cross(down, forward))
    down = _unit(np.cross(forward, right))
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=-1)
    pose[:3, 3] = centre
    return pose


def camera_diameter(c2w) -> float:
    """Eq. 4: the largest distance between two camera centres of [V, 4, 4] `c2w`."""
    centres = np.asarray(c2w, np.float64)[:, :3, 3]
    diffs = centres[:, None, :] - centres[None, :, :]
    return float(np.sqrt(np.max(np.sum(diffs * diffs, axis=-1))))


def globalsplat_normalize(c2w, scale_factor: float = 1.0) -> SceneNormalization:
    """GlobalSplat's canonical frame (eqs. 3-5), as the official `scene_normalize_c2w`.

    Args:
      c2w: [V, 4, 4] camera-to-world of one scene (the official code passes context + target).
      scale_factor: multiplier on the diameter (the official `scene_scale_factor`, default 1).
    Returns:
      SceneNormalization; `scale` is the official `scene_scale`. A degenerate constellation (one
      camera, or all centres equal) gets scale 1, as in the official code.
    """
    c2w_in = _check_c2w(c2w)
    c2w64 = c2w_in.astype(np.float64)
    frame = average_camera_pose(c2w64)
    aligned = _rigid_inverse(frame)[None] @ c2w64  # eq. 3
    scale = float(scale_factor) * camera_diameter(aligned)  # eq. 4 (rigid: same as before alignment)
    if not np.isfinite(scale) or scale <= 1e-12:
        scale = 1.0
    aligned[:, :3, 3] /= scale  # eq. 5
    return SceneNormalization(aligned.astype(c2w_in.dtype), frame.astype(c2w_in.dtype), scale)


def first_camera_normalize(c2w, context_indices=(0, -1)) -> SceneNormalization:
    """NoPoSplat-style baseline: camera `context_indices[0]` becomes the identity, and lengths are
    divided by the distance between cameras `context_indices[0]` and `context_indices[1]`."""
    c2w_in = _check_c2w(c2w)
    c2w64 = c2w_in.astype(np.float64)
    first, second = context_indices
    frame = c2w64[first].copy()
    scale = float(np.linalg.norm(c2w64[first, :3, 3] - c2w64[second, :3, 3]))
    if not np.isfinite(scale) or scale <= 1e-12:
        scale = 1.0
    out = _apply_frame(c2w64, frame, scale)
    return SceneNormalization(out.astype(c2w_in.dtype), frame.astype(c2w_in.dtype), scale)


def metric_identity(c2w) -> SceneNormalization:
    """No normalisation (metric datasets): the cameras unchanged, identity frame, scale 1."""
    c2w_in = _check_c2w(c2w)
    return SceneNormalization(c2w_in.copy(), np.eye(4, dtype=c2w_in.dtype), 1.0)


def canonical_points_to_world(points, norm: SceneNormalization) -> np.ndarray:
    """[..., 3] canonical-frame points -> world (the inverse of the normalisation)."""
    frame = np.asarray(norm.frame_c2w, np.float64)
    pts = np.asarray(points, np.float64) * norm.scale
    return pts @ frame[:3, :3].T + frame[:3, 3]


def globalsplat_frame_jax(c2w, eps: float = 1e-8):
    """Batched, jittable eqs. 3-5: [..., V, 4, 4] c2w -> (frame_c2w [..., 4, 4], scale [...]).

    Same construction as `globalsplat_normalize` (average camera, constellation diameter; scale 1 for
    a degenerate constellation), for use inside a model when the data arrives un-normalised."""
    import jax.numpy as jnp

    def unit(v):
        return v / (jnp.linalg.norm(v, axis=-1, keepdims=True) + eps)

    centre = jnp.mean(c2w[..., :3, 3], axis=-2)
    forward = unit(jnp.mean(c2w[..., :3, 2], axis=-2))
    down = jnp.mean(c2w[..., :3, 1], axis=-2)
    right = unit(jnp.cross(down, forward))
    down = unit(jnp.cross(forward, right))
    rot = jnp.stack([right, down, forward], axis=-1)
    frame = jnp.zeros(c2w.shape[:-3] + (4, 4), c2w.dtype)
    frame = frame.at[..., :3, :3].set(rot).at[..., :3, 3].set(centre).at[..., 3, 3].set(1.0)
    centres = c2w[..., :3, 3]
    diff = centres[..., :, None, :] - centres[..., None, :, :]
    scale = jnp.sqrt(jnp.max(jnp.sum(diff * diff, axis=-1), axis=(-1, -2)))
    scale = jnp.where(jnp.isfinite(scale) & (scale > 1e-12), scale, 1.0)
    return frame, scale


def to_frame_jax(c2w, frame_c2w, scale):
    """[..., V, 4, 4] world c2w -> canonical: frame^-1 @ c2w, translations / scale."""
    import jax.numpy as jnp

    rot_t = jnp.swapaxes(frame_c2w[..., :3, :3], -1, -2)
    r = jnp.einsum("...ij,...vjk->...vik", rot_t, c2w[..., :3, :3])
    t = jnp.einsum("...ij,...vj->...vi", rot_t, c2w[..., :3, 3] - frame_c2w[..., None, :3, 3])
    t = t / scale[..., None, None]
    top = jnp.concatenate([r, t[..., None]], axis=-1)
    bottom = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 0.0, 1.0], c2w.dtype), top.shape[:-2] + (1, 4))
    return jnp.concatenate([top, bottom], axis=-2)
