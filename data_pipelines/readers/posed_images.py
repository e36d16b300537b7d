"""Users' own posed images (COLMAP models, transforms.json) -> one scene record in the locojax
convention: OpenCV camera-to-world, intrinsics normalised by the image size (pixel centres at
(u + 0.5) / W, which is COLMAP's and nerfstudio's convention too), frames in file-name order.

The format readers (`colmap_model`, `transforms_json`) produce a `PosedImages`; this module checks it
(finite poses, >= 2 frames, one image size, files present, JPEG/PNG), optionally normalises the scene
scale, and assembles the record. Every error is a ValueError whose message is one line naming the
file and the image.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

from data_pipelines import encoding
from data_pipelines.records import make_record

NORMALIZATIONS = ("none", "cameras")


@dataclasses.dataclass
class SparsePoints:
    """Triangulated points of a COLMAP model, in the scene's world frame.

    Attributes:
      xyz:          float64 [P, 3] world positions.
      rgb:          uint8 [P, 3] colours.
      observations: float64 [M, 4] rows (frame index, point index, x / W, y / H): where each point was
                    measured in each frame, in normalised image coordinates (pixel centres at (u + 0.5) / W).
    """

    xyz: np.ndarray
    rgb: np.ndarray
    observations: np.ndarray

    def to_json(self) -> dict:
        return {"xyz": np.round(self.xyz, 6).tolist(), "rgb": self.rgb.astype(int).tolist(),
                "observations": np.round(self.observations, 7).tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "SparsePoints":
        return cls(np.asarray(d["xyz"], np.float64).reshape(-1, 3), np.asarray(d["rgb"], np.uint8).reshape(-1, 3),
                   np.asarray(d["observations"], np.float64).reshape(-1, 4))


@dataclasses.dataclass
class PosedImages:
    """One scene as a reader found it, before checks.

    Attributes:
      key:        scene key (the source folder's name).
      source:     the model / transforms file (named in errors).
      names:      [N] image names relative to `image_dir`.
      image_dir:  folder holding the images.
      K:          float64 [N, 3, 3] pixel intrinsics (pinhole, no distortion left).
      c2w:        float64 [N, 4, 4] OpenCV camera-to-world.
      sizes:      int [N, 2] (width, height) the intrinsics refer to.
      points:     optional `SparsePoints`.
      preloaded:  optional {name: encoded bytes} for frames already read (undistorted into a
                  temporary folder); others are read from `image_dir`.
    """

    key: str
    source: Path
    names: list
    image_dir: Path
    K: np.ndarray
    c2w: np.ndarray
    sizes: np.ndarray
    points: Optional[SparsePoints] = None
    preloaded: Optional[dict] = None


def scene_normalization(c2w: np.ndarray, mode: str) -> dict:
    """The similarity x -> scale * (x - centre) that `mode` applies to a scene.

    "none": identity. "cameras": centre the camera centres on their mean and scale them so the farthest
    lies at distance 1 (nerfstudio's `auto_scale_poses` puts the largest |coordinate| at 1; a radius
    does not depend on the world axes).

    Args:
      c2w:  [N, 4, 4] camera-to-world.
      mode: one of NORMALIZATIONS.
    Returns:
      {"mode", "centre": [3], "scale"}: recorded in the dataset metadata.
    """
    if mode not in NORMALIZATIONS:
        raise ValueError(f"--normalize={mode!r}: expected one of {', '.join(NORMALIZATIONS)}")
    if mode == "none":
        return {"mode": mode, "centre": [0.0, 0.0, 0.0], "scale": 1.0}
    centres = c2w[:, :3, 3]
    centre = centres.mean(axis=0)
    radius = float(np.linalg.norm(centres - centre, axis=-1).max())
    scale = 1.0 / radius if radius > 0 else 1.0
    return {"mode": mode, "centre": centre.tolist(), "scale": scale}


def apply_normalization(c2w: np.ndarray, points: Optional[SparsePoints], norm: dict):
    """Apply `scene_normalization`'s similarity to cameras (rotation kept) and sparse points."""
    centre, scale = np.asarray(norm["centre"], np.float64), float(norm["scale"])
    out = c2w.copy()
    out[:, :3, 3] = (c2w[:, :3, 3] - centre) * scale
    if points is not None:
        points = SparsePoints((points.xyz - centre) * scale, points.rgb, points.observations)
    return out, points


def _check(scene: PosedImages) -> None:
    n = len(scene.names)
    if n < 2:
        only = f" ({scene.names[0]})" if n else ""
        raise ValueError(f"{scene.source}: scene {scene.key!r} has {n} posed image{'' if n == 1 else 's'}{only}; "
                         f"at least 2 are needed")
    for i, name in enumerate(scene.names):
        if not np.isfinite(scene.c2w[i]).all():
            raise ValueError(f"{scene.source}: image {name}: pose is not finite (NaN/inf)")
        if not np.isfinite(scene.K[i]).all() or scene.K[i, 0, 0] <= 0 or scene.K[i, 1, 1] <= 0:
            raise ValueError(f"{scene.source}: image {name}: intrinsics are not finite and positive")
    if len({tuple(s) for s in np.asarray(scene.sizes).tolist()}) > 1:
        w, h = scene.sizes[0]
        j = next(i for i, s in enumerate(scene.sizes) if tuple(s) != (w, h))
        raise ValueError(f"{scene.source}: image {scene.names[j]} is {scene.sizes[j][0]}x{scene.sizes[j][1]} "
                         f"but {scene.names[0]} is {w}x{h}; one image size per scene is needed")


def read_image_bytes(path: Path, source: Path, name: str, size) -> bytes:
    """The encoded bytes of one frame, unchanged when JPEG/PNG (so decoded pixels match the source
    exactly), else re-encoded as PNG; checks the file exists and has the size the camera says."""
    if not path.is_file():
        raise ValueError(f"{source}: image {name}: file {path} is missing")
    data = path.read_bytes()
    try:
        with Image.open(path) as im:
            im.load()
            actual = im.size
            rgb = None if data[:3] == encoding.JPEG_MAGIC or data[:8] == encoding.PNG_MAGIC else np.asarray(im.convert("RGB"))
    except OSError as e:
        raise ValueError(f"{source}: image {name}: {path} is not a readable image ({e})") from None
    if tuple(int(s) for s in size) != tuple(actual):
        raise ValueError(f"{source}: image {name}: {path} is {actual[0]}x{actual[1]} but its camera is "
                         f"{int(size[0])}x{int(size[1])}")
    return data if rgb is None else encoding.encode_png(rgb)


def to_record(scene: PosedImages, normalize: str = "none") -> tuple[str, dict, dict]:
    """Check `scene` and assemble its record.

    Args:
      scene:     a reader's `PosedImages`.
      normalize: "none" or "cameras" (see `scene_normalization`).
    Returns:
      (key, record, metadata): metadata holds the frame names, the normalisation, the sparse points
      (if any, normalised like the cameras) and the depth range of those points.
    Raises:
      ValueError: one line naming the file and the image.
    """
    _check(scene)
    order = np.argsort(np.asarray(scene.names, dtype=object), kind="stable")
    names = [scene.names[i] for i in order]
    K, c2w, sizes = scene.K[order], scene.c2w[order], np.asarray(scene.sizes)[order]
    points = scene.points
    if points is not None and len(points.observations):
        remap = np.empty(len(order), np.int64)
        remap[order] = np.arange(len(order))
        obs = points.observations.copy()
        obs[:, 0] = remap[obs[:, 0].astype(np.int64)]
        points = SparsePoints(points.xyz, points.rgb, obs)
    norm = scene_normalization(c2w, normalize)
    c2w, points = apply_normalization(c2w, points, norm)
    preloaded = scene.preloaded or {}
    images = [preloaded[name] if name in preloaded else
              read_image_bytes(scene.image_dir / name, scene.source, name, sizes[i]) for i, name in enumerate(names)]
    width, height = (float(s) for s in sizes[0])
    K_norm = K.copy()
    K_norm[:, 0] /= width
    K_norm[:, 1] /= height
    record = make_record(scene.key, images, K_norm, c2w, np.arange(len(names)))
    meta = {"source": str(scene.source), "names": names, "normalization": norm,
            "image_size": [int(width), int(height)]}
    if points is not None:
        meta["points"] = points.to_json()
        meta["point_depth_range"] = point_depth_range(c2w, points)
    return scene.key, record, meta


def point_depth_range(c2w: np.ndarray, points: SparsePoints) -> Optional[list]:
    """[2nd, 98th] percentile z-depth of the observed sparse points in their frames (a guide to
    near/far), or None without observations."""
    if not len(points.observations):
        return None
    frames = points.observations[:, 0].astype(np.int64)
    pts = points.xyz[points.observations[:, 1].astype(np.int64)]
    w2c = np.linalg.inv(c2w[frames])
    z = np.einsum("mj,mj->m", w2c[:, 2, :3], pts) + w2c[:, 2, 3]
    return [float(np.percentile(z, 2)), float(np.percentile(z, 98))]
