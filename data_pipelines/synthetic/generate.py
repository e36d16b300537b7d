"""One synthetic scene for (split, index): spec -> trajectory -> ray-cast frames.

The scene depends only on (seed, split, index, image size, num_frames): a dataset of 4 scenes is a
prefix of one of 400, and train and test draw from disjoint random streams (test never seen in
training). Near/far for every scene: NEAR = 0.5 m, FAR = 15 m (cameras keep 0.8 m from walls and
objects, rooms are at most 7 x 7 x 3.2 m, so every visible z-depth lies in [0.5, 10]).
"""

from __future__ import annotations

import hashlib

import numpy as np

from data_pipelines.synthetic import raycast
from data_pipelines.synthetic.scene_spec import sample_scene_spec
from data_pipelines.synthetic.trajectory import sample_trajectory

NEAR = 0.5
FAR = 15.0
SPLITS = ("train", "test")
FRAME_PERIOD_US = 33_333  # timestamps in microseconds at 30 fps, like RealEstate10K's


def scene_key(split: str, index: int) -> str:
    return f"synthetic_{split}_{index:05d}"


def scene_rng(seed: int, split: str, index: int) -> np.random.Generator:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return np.random.default_rng([int(seed), SPLITS.index(split), int(index)])


def sample_intrinsics(rng: np.random.Generator) -> np.ndarray:
    """Normalized pinhole intrinsics like RealEstate10K's after its 256x256 crop (fx ~ 0.8-1.0 W,
    i.e. 53-64 degree horizontal field of view), square pixels, principal point near the centre."""
    f = rng.uniform(0.8, 1.0)
    cx, cy = 0.5 + rng.uniform(-0.01, 0.01, size=2)
    return np.array([[f, 0, cx], [0, f, cy], [0, 0, 1]], np.float64)


def sample_scene(seed: int, split: str, index: int, num_frames: int):
    """(spec, c2w [F, 4, 4], K_norm [3, 3]) for one scene, without rendering."""
    rng = scene_rng(seed, split, index)
    spec = sample_scene_spec(rng)
    K = sample_intrinsics(rng)
    c2w = sample_trajectory(spec, rng, num_frames)
    while c2w is None:  # crowded room: drop the last object until a free walkthrough exists
        if spec.spheres:
            spec.spheres.pop()
        elif spec.boxes:
            spec.boxes.pop()
        c2w = sample_trajectory(spec, rng, num_frames)
    return spec, c2w, K


def generate_scene(seed: int, split: str, index: int, image_size: tuple[int, int], num_frames: int) -> dict:
    """Render one scene.

    Returns dict with key str, images uint8 [F, H, W, 3], depth float32 [F, H, W] (z-depth, metres),
    intrinsics float32 [F, 3, 3] normalized, c2w float32 [F, 4, 4] OpenCV, timestamps int64 [F].
    """
    height, width = image_size
    spec, c2w, K = sample_scene(seed, split, index, num_frames)
    images = np.empty((num_frames, height, width, 3), np.uint8)
    depth = np.empty((num_frames, height, width), np.float32)
    cam_rays = raycast.camera_rays(K, height, width)
    for i in range(num_frames):
        rgb, z = raycast.render_view(spec, c2w[i], K, height, width, cam_rays)
        images[i] = np.round(rgb * 255.0).astype(np.uint8)
        depth[i] = z
    return {
        "key": scene_key(split, index),
        "images": images,
        "depth": depth,
        "intrinsics": np.repeat(K[None].astype(np.float32), num_frames, axis=0),
        "c2w": c2w.astype(np.float32),
        "timestamps": np.arange(num_frames, dtype=np.int64) * FRAME_PERIOD_US,
    }


def spec_fingerprint(seed: int, split: str, index: int, num_frames: int) -> str:
    """A short hash of the camera path, to detect a changed generator under an existing dataset."""
    _, c2w, K = sample_scene(seed, split, index, num_frames)
    return hashlib.sha1(np.round(c2w, 5).tobytes() + np.round(K, 6).tobytes()).hexdigest()[:12]
