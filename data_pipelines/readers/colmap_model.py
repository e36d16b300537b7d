"""COLMAP sparse models (text or binary, read with `pycolmap`) with their images -> `PosedImages`.

A scene folder holds `images/` and the model in `sparse/0/`, `sparse/` or the folder itself
(`cameras`, `images`, `points3D` as .bin or .txt; COLMAP's own layouts). COLMAP's `cam_from_world`
is the OpenCV world-to-camera (x right, y down, z forward; pixel centres at (u + 0.5)), so c2w is
its rigid inverse. Cameras other than (SIMPLE_)PINHOLE are undistorted first with COLMAP's own image
undistorter (`pycolmap.undistort_images`), which writes pinhole cameras, warped images and the
points' 2D observations in the undistorted images.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from data_pipelines.readers.posed_images import PosedImages, SparsePoints

PINHOLE_MODELS = ("SIMPLE_PINHOLE", "PINHOLE")
MAX_POINTS = 10000  # sparse points kept per scene in the metadata (a deterministic stride beyond)


def find_model_dir(folder: Path) -> Optional[Path]:
    """The folder holding cameras.bin/.txt: sparse/0, sparse, or `folder` itself (None if none)."""
    for d in (folder / "sparse" / "0", folder / "sparse", folder):
        if (d / "cameras.bin").is_file() or (d / "cameras.txt").is_file():
            return d
    return None


def is_scene_folder(folder: Path) -> bool:
    return find_model_dir(folder) is not None


def _model_file(model_dir: Path, stem: str) -> Path:
    binary = model_dir / f"{stem}.bin"
    return binary if binary.is_file() else model_dir / f"{stem}.txt"


def _check_text_camera_models(model_dir: Path) -> None:
    """pycolmap answers an unknown model name with "Camera model does not exist" and no line; name it."""
    import pycolmap

    path = model_dir / "cameras.txt"
    if (model_dir / "cameras.bin").is_file() or not path.is_file():
        return
    known = set(pycolmap.CameraModelId.__members__) - {"INVALID"}
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 4 or fields[1] not in known:
            raise ValueError(f"{path}: camera {fields[0]}: unknown camera model {fields[1] if len(fields) > 1 else ''!r} "
                             f"(COLMAP models: {', '.join(sorted(known))})")


def _check_text_poses(model_dir: Path) -> None:
    """COLMAP's text reader stops at a pose it cannot parse ("nan") without naming the image; name it.
    images.txt alternates an image line (ID QW QX QY QZ TX TY TZ CAMERA_ID NAME) and its (possibly
    empty) observation line."""
    path = model_dir / "images.txt"
    if (model_dir / "images.bin").is_file() or not path.is_file():
        return
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    for line in lines[0::2]:
        fields = line.split()
        if not fields:
            continue
        name = " ".join(fields[9:]) if len(fields) >= 10 else f"id {fields[0]}"
        try:
            pose = [float(v) for v in fields[1:8]]
        except ValueError:
            pose = [float("nan")]
        if len(fields) < 10 or not np.isfinite(pose).all():
            raise ValueError(f"{path}: image {name}: pose is not finite (NaN/inf) or not 7 numbers")


def _read(model_dir: Path):
    import pycolmap

    _check_text_camera_models(model_dir)
    _check_text_poses(model_dir)
    try:
        return pycolmap.Reconstruction(str(model_dir))
    except Exception as e:  # pycolmap raises ValueError/RuntimeError with terse messages
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"{model_dir}: cannot read the COLMAP model: {first}") from None


def _undistort(rec, model_dir: Path, image_dir: Path, work: Path):
    """COLMAP's undistorter: pinhole cameras and warped images under `work` (images/, sparse/)."""
    import pycolmap

    for image in rec.images.values():
        cam = rec.cameras[image.camera_id]
        if cam.model.name in ("EQUIRECTANGULAR",) or not cam.is_perspective():
            raise ValueError(f"{_model_file(model_dir, 'cameras')}: image {image.name}: camera {image.camera_id} "
                             f"model {cam.model.name} is not a perspective camera; it cannot be undistorted to a pinhole")
    pycolmap.undistort_images(str(work), str(model_dir), str(image_dir))
    return _read(work / "sparse"), work / "images"


def read_scene(folder: Path, key: Optional[str] = None) -> PosedImages:
    """The posed images of one COLMAP scene folder (undistorted if needed).

    Args:
      folder: scene folder (see the module docstring).
      key:    scene key; default the folder name.
    Raises:
      ValueError: one line naming the file and the image.
    """
    folder = Path(folder)
    key = key or folder.name
    model_dir = find_model_dir(folder)
    if model_dir is None:
        raise ValueError(f"{folder}: no COLMAP model (cameras.bin/.txt in sparse/0/, sparse/ or the folder)")
    image_dir = folder / "images"
    if not image_dir.is_dir():
        raise ValueError(f"{folder}: no images/ folder next to the COLMAP model {model_dir}")
    rec = _read(model_dir)
    images_file = _model_file(model_dir, "images")
    for image in rec.images.values():
        if image.has_pose and not (image_dir / image.name).is_file():
            raise ValueError(f"{images_file}: image {image.name}: file {image_dir / image.name} is missing")
        if image.has_pose and not np.isfinite(image.cam_from_world().matrix()).all():
            raise ValueError(f"{images_file}: image {image.name}: pose is not finite (NaN/inf)")
    if any(rec.cameras[im.camera_id].model.name not in PINHOLE_MODELS for im in rec.images.values()):
        with tempfile.TemporaryDirectory(prefix="locojax_undistort_") as work:
            rec, undistorted_dir = _undistort(rec, model_dir, image_dir, Path(work))
            scene = _posed_images(rec, key, images_file, undistorted_dir)
            # The undistorted frames live in a temporary folder: read them now.
            from data_pipelines.readers.posed_images import read_image_bytes

            scene.preloaded = {n: read_image_bytes(undistorted_dir / n, images_file, n, s)
                               for n, s in zip(scene.names, scene.sizes)}
            return scene
    return _posed_images(rec, key, images_file, image_dir)


def _posed_images(rec, key: str, images_file: Path, image_dir: Path) -> PosedImages:
    registered = sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name)
    names, Ks, c2ws, sizes, frame_of = [], [], [], [], {}
    for i, image in enumerate(registered):
        cam = rec.cameras[image.camera_id]
        w2c = np.eye(4)
        w2c[:3, :4] = image.cam_from_world().matrix()
        c2w = np.eye(4)
        c2w[:3, :3] = w2c[:3, :3].T
        c2w[:3, 3] = -w2c[:3, :3].T @ w2c[:3, 3]
        names.append(image.name)
        Ks.append(np.asarray(cam.calibration_matrix(), np.float64))
        c2ws.append(c2w)
        sizes.append((int(cam.width), int(cam.height)))
        frame_of[image.image_id] = i
    points = _sparse_points(rec, registered, frame_of, sizes)
    n = len(names)
    return PosedImages(key=key, source=images_file, names=names, image_dir=image_dir,
                       K=np.asarray(Ks).reshape(n, 3, 3), c2w=np.asarray(c2ws).reshape(n, 4, 4),
                       sizes=np.asarray(sizes, np.int64).reshape(n, 2), points=points)


def _sparse_points(rec, registered, frame_of, sizes) -> SparsePoints:
    ids = sorted(rec.points3D.keys())
    if len(ids) > MAX_POINTS:
        ids = ids[:: -(-len(ids) // MAX_POINTS)]
    by_image = {im.image_id: im for im in registered}
    xyz, rgb, obs = [], [], []
    for p, pid in enumerate(ids):
        point = rec.points3D[pid]
        xyz.append(point.xyz)
        rgb.append(point.color)
        for el in point.track.elements:
            image = by_image.get(el.image_id)
            if image is None:
                continue
            f = frame_of[el.image_id]
            x, y = image.points2D[el.point2D_idx].xy
            obs.append((f, p, x / sizes[f][0], y / sizes[f][1]))
    return SparsePoints(np.asarray(xyz, np.float64).reshape(-1, 3), np.asarray(rgb, np.uint8).reshape(-1, 3),
                        np.asarray(obs, np.float64).reshape(-1, 4))
