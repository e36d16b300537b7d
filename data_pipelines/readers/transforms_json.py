"""nerfstudio / instant-ngp `transforms.json` -> `PosedImages`.

Conventions (nerfstudio's "Data conventions" page and its `nerfstudio_dataparser`; instant-ngp's
`nerf_loader`): `transform_matrix` is the camera-to-world of an OpenGL camera (x right, y up, z back),
so the OpenCV c2w is `transform_matrix @ diag(1, -1, -1, 1)`. Intrinsics are pixels: `fl_x`, `fl_y`,
`cx`, `cy`, `w`, `h` at the top level or per frame (a frame's value wins); instant-ngp / Blender
files may give `camera_angle_x` (and `camera_angle_y`) instead, with fl = w / 2 / tan(angle / 2), and
omit w / h (read from the image) and cx / cy (the image centre). `file_path` is relative to the
file's folder; Blender files omit the extension (".png" is tried). Distortion (`k1..k4`, `p1`, `p2`
with `camera_model` OPENCV or OPENCV_FISHEYE) is removed with COLMAP's undistorter, as for COLMAP
models.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from data_pipelines.readers.posed_images import PosedImages

GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])
DISTORTION_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")
CAMERA_MODELS = ("OPENCV", "OPENCV_FISHEYE", "PINHOLE", "SIMPLE_PINHOLE")


def is_scene_folder(folder: Path) -> bool:
    return (Path(folder) / "transforms.json").is_file()


def _image_path(folder: Path, file_path: str) -> Path:
    path = folder / file_path
    if not path.suffix and not path.exists() and path.with_suffix(".png").exists():
        return path.with_suffix(".png")
    return path


def _frame_camera(meta: dict, frame: dict, path: Path, source: Path, name: str):
    """(K [3, 3], distortion {key: value}, model, (w, h)) of one frame."""
    get = lambda k: frame.get(k, meta.get(k))  # noqa: E731  a frame's value overrides the file's
    w, h = get("w"), get("h")
    if w is None or h is None:
        if not path.is_file():
            raise ValueError(f"{source}: image {name}: file {path} is missing")
        with Image.open(path) as im:
            w, h = im.size
    w, h = int(w), int(h)
    fx, fy = get("fl_x"), get("fl_y")
    if fx is None and get("camera_angle_x") is not None:
        fx = 0.5 * w / math.tan(0.5 * float(get("camera_angle_x")))
    if fy is None and get("camera_angle_y") is not None:
        fy = 0.5 * h / math.tan(0.5 * float(get("camera_angle_y")))
    if fx is None and fy is None:
        raise ValueError(f"{source}: image {name}: no focal length (fl_x / fl_y or camera_angle_x)")
    fx = float(fx if fx is not None else fy)
    fy = float(fy if fy is not None else fx)
    cx = float(get("cx") if get("cx") is not None else 0.5 * w)
    cy = float(get("cy") if get("cy") is not None else 0.5 * h)
    model = str(get("camera_model") or "OPENCV")
    if model not in CAMERA_MODELS:
        raise ValueError(f"{source}: image {name}: camera_model {model!r} is not supported "
                         f"(expected one of {', '.join(CAMERA_MODELS)})")
    dist = {k: float(get(k) or 0.0) for k in DISTORTION_KEYS}
    K = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    return K, dist, model, (w, h)


def read_scene(folder: Path, key=None) -> PosedImages:
    """The posed images of a folder with `transforms.json` (undistorted if it has distortion).

    Raises:
      ValueError: one line naming the file and the image.
    """
    folder = Path(folder)
    source = folder / "transforms.json"
    try:
        meta = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{source}: not a readable JSON file ({e})") from None
    frames = meta.get("frames")
    if not isinstance(frames, list):
        raise ValueError(f"{source}: no 'frames' list")
    names, Ks, c2ws, sizes, dists, models = [], [], [], [], [], []
    for i, frame in enumerate(frames):
        if "file_path" not in frame or "transform_matrix" not in frame:
            raise ValueError(f"{source}: frame {i}: needs 'file_path' and 'transform_matrix'")
        path = _image_path(folder, str(frame["file_path"]))
        name = path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)
        try:
            c2w_gl = np.asarray(frame["transform_matrix"], np.float64)
        except (TypeError, ValueError):
            c2w_gl = np.full((4, 4), np.nan)
        if c2w_gl.shape == (3, 4):
            c2w_gl = np.concatenate([c2w_gl, [[0.0, 0.0, 0.0, 1.0]]])
        if c2w_gl.shape != (4, 4):
            raise ValueError(f"{source}: image {name}: transform_matrix must be 4x4, got {c2w_gl.shape}")
        K, dist, model, size = _frame_camera(meta, frame, path, source, name)
        names.append(name)
        Ks.append(K)
        c2ws.append(c2w_gl @ GL_TO_CV)
        sizes.append(size)
        dists.append(dist)
        models.append(model)
    n = len(names)
    scene = PosedImages(key=key or folder.name, source=source, names=names, image_dir=folder,
                        K=np.asarray(Ks).reshape(n, 3, 3), c2w=np.asarray(c2ws).reshape(n, 4, 4),
                        sizes=np.asarray(sizes, np.int64).reshape(n, 2))
    if any(any(v != 0.0 for v in d.values()) for d in dists):
        return _undistorted(scene, dists, models)
    return scene


def _undistorted(scene: PosedImages, dists, models) -> PosedImages:
    """Hand distorted cameras to COLMAP's undistorter through a temporary COLMAP model."""
    import pycolmap

    from data_pipelines.readers import colmap_model
    from data_pipelines.readers.posed_images import read_image_bytes

    for i, name in enumerate(scene.names):
        if not np.isfinite(scene.c2w[i]).all():
            raise ValueError(f"{scene.source}: image {name}: pose is not finite (NaN/inf)")
        if not (scene.image_dir / name).is_file():
            raise ValueError(f"{scene.source}: image {name}: file {scene.image_dir / name} is missing")
    rec = pycolmap.Reconstruction()
    for i, name in enumerate(scene.names):
        K, d, (w, h) = scene.K[i], dists[i], scene.sizes[i]
        if models[i] == "OPENCV_FISHEYE":
            params = [K[0, 0], K[1, 1], K[0, 2], K[1, 2], d["k1"], d["k2"], d["k3"], d["k4"]]
        else:
            params = [K[0, 0], K[1, 1], K[0, 2], K[1, 2], d["k1"], d["k2"], d["p1"], d["p2"]]
        model = "OPENCV_FISHEYE" if models[i] == "OPENCV_FISHEYE" else "OPENCV"
        rec.add_camera_with_trivial_rig(pycolmap.Camera(model=model, width=int(w), height=int(h),
                                                        params=params, camera_id=i + 1))
        w2c = np.linalg.inv(scene.c2w[i])
        image = pycolmap.Image(name=name, camera_id=i + 1, image_id=i + 1)
        rec.add_image_with_trivial_frame(image, pycolmap.Rigid3d(w2c[:3, :4]))
    with tempfile.TemporaryDirectory(prefix="locojax_undistort_") as work:
        work = Path(work)
        (work / "model").mkdir()
        rec.write_binary(str(work / "model"))
        undistorted, image_dir = colmap_model._undistort(rec, work / "model", scene.image_dir, work / "out")
        out = colmap_model._posed_images(undistorted, scene.key, scene.source, image_dir)
        out.points = None
        out.preloaded = {n: read_image_bytes(image_dir / n, scene.source, n, s) for n, s in zip(out.names, out.sizes)}
        return out
