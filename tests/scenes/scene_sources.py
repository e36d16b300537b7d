"""Users' own scene layouts written from the synthetic renders, for the import, check and predict tests:
a COLMAP model written with pycolmap (text or binary) and a nerfstudio transforms.json, with the exact
cameras and lossless PNG frames of one synthetic scene, and sparse points lifted from its ray-cast depth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])


def synthetic_scene(num_frames: int = 6, size: int = 64, stride: int = 3, index: int = 0) -> dict:
    """Frames 0, stride, 2 * stride, ... of synthetic test scene `index` (images, depth, normalised K, c2w)."""
    from data_pipelines.synthetic.generate import generate_scene

    s = generate_scene(0, "test", index, (size, size), num_frames * stride)
    return {k: (v[::stride] if isinstance(v, np.ndarray) else v) for k, v in s.items()}


def frame_names(n: int) -> list:
    return [f"frame_{i:03d}.png" for i in range(n)]


def write_images(folder: Path, scene: dict) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    names = frame_names(len(scene["images"]))
    for name, image in zip(names, scene["images"]):
        Image.fromarray(image).save(folder / name)
    return names


def lifted_points(scene: dict, count: int = 64, seed: int = 0):
    """Points on the surfaces seen by frame 0 (from its depth) and their exact projections into every
    frame that sees them (in front, inside, and not occluded by more than 2 cm in that frame's depth).

    Returns:
      xyz [P, 3] float64 world points, and per frame a list of (point index, x, y) pixel observations.
    """
    images, depth = scene["images"], scene["depth"]
    n, h, w = depth.shape
    K = scene["intrinsics"][0].astype(np.float64) * np.array([[w], [h], [1.0]])
    rng = np.random.default_rng(seed)
    us, vs = rng.integers(2, w - 2, count), rng.integers(2, h - 2, count)
    z = depth[0, vs, us].astype(np.float64)
    cam = np.linalg.inv(K) @ np.stack([us + 0.5, vs + 0.5, np.ones(count)]) * z
    c2w0 = scene["c2w"][0].astype(np.float64)
    xyz = (c2w0[:3, :3] @ cam + c2w0[:3, 3:]).T
    observations = []
    for f in range(n):
        w2c = np.linalg.inv(scene["c2w"][f].astype(np.float64))
        pc = xyz @ w2c[:3, :3].T + w2c[:3, 3]
        pix = pc @ K.T
        x, y = pix[:, 0] / pix[:, 2], pix[:, 1] / pix[:, 2]
        obs = []
        for p in range(count):
            if pc[p, 2] <= 0 or not (0 <= x[p] < w and 0 <= y[p] < h):
                continue
            if abs(depth[f, int(y[p]), int(x[p])] - pc[p, 2]) > 0.02:
                continue
            obs.append((p, x[p], y[p]))
        observations.append(obs)
    return xyz, observations


def write_colmap(folder: Path, scene: dict, binary: bool, *, model: str = "PINHOLE", params=None,
                 c2w=None, points: bool = True) -> Path:
    """A COLMAP scene folder (images/ + sparse/0/) written with pycolmap. `c2w` replaces the scene's
    (OpenCV) poses, e.g. with flipped axes; `model`/`params` another camera model."""
    import pycolmap

    folder = Path(folder)
    names = write_images(folder / "images", scene)
    n, h, w = scene["images"].shape[:3]
    K = scene["intrinsics"][0].astype(np.float64) * np.array([[w], [h], [1.0]])
    if params is None:
        params = [K[0, 0], K[1, 1], K[0, 2], K[1, 2]]
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(model=model, width=w, height=h, params=params, camera_id=1))
    poses = scene["c2w"] if c2w is None else c2w
    xyz, observations = lifted_points(scene) if points else (np.zeros((0, 3)), [[] for _ in range(n)])
    # Image ids in reverse name order: the importer must order frames by name, not by id.
    for i, name in enumerate(names):
        keypoints = np.array([[x, y] for _, x, y in observations[i]], np.float64).reshape(-1, 2)
        image = pycolmap.Image(name=name, keypoints=keypoints, camera_id=1, image_id=n - i)
        w2c = np.linalg.inv(np.asarray(poses[i], np.float64))
        rec.add_image_with_trivial_frame(image, pycolmap.Rigid3d(w2c[:3, :4]))
    for p in range(len(xyz)):
        track = pycolmap.Track()
        for i in range(n):
            for k, (q, _, _) in enumerate(observations[i]):
                if q == p:
                    track.add_element(n - i, k)
        if track.length() >= 2:
            rec.add_point3D(xyz[p], track, np.array([200, 100, 50], np.uint8))
    model_dir = folder / "sparse" / "0"
    model_dir.mkdir(parents=True, exist_ok=True)
    (rec.write_binary if binary else rec.write_text)(str(model_dir))
    return folder


def write_transforms(folder: Path, scene: dict, *, c2w_gl=None, extra: dict = None) -> Path:
    """A nerfstudio transforms.json (OpenGL camera-to-world) next to images/frame_*.png."""
    folder = Path(folder)
    names = write_images(folder / "images", scene)
    n, h, w = scene["images"].shape[:3]
    K = scene["intrinsics"][0].astype(np.float64) * np.array([[w], [h], [1.0]])
    poses = [np.asarray(c, np.float64) @ GL_TO_CV for c in scene["c2w"]] if c2w_gl is None else c2w_gl
    meta = {"camera_model": "OPENCV", "fl_x": K[0, 0], "fl_y": K[1, 1], "cx": K[0, 2], "cy": K[1, 2],
            "w": w, "h": h, "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0,
            "frames": [{"file_path": f"images/{name}", "transform_matrix": np.asarray(p).tolist()}
                       for name, p in zip(names, poses)]}
    meta.update(extra or {})
    (folder / "transforms.json").write_text(json.dumps(meta, indent=1))
    return folder
