"""Walkthrough camera paths: smooth, constant-speed, turning slowly, never closer than `clearance`
to a wall or object (so every visible surface lies beyond the documented near plane)."""

from __future__ import annotations

import numpy as np

from data_pipelines.synthetic.scene_spec import SceneSpec, obstacle_discs


def _catmull_rom(points: np.ndarray, samples: int) -> np.ndarray:
    """Centripetal-free (uniform) Catmull-Rom spline through [K, 2] control points -> [samples, 2]."""
    p = np.concatenate([2 * points[:1] - points[1:2], points, 2 * points[-1:] - points[-2:-1]])
    segs = len(points) - 1
    t = np.linspace(0, segs, samples)
    i = np.minimum(t.astype(int), segs - 1)
    f = (t - i)[:, None]
    p0, p1, p2, p3 = p[i], p[i + 1], p[i + 2], p[i + 3]
    return 0.5 * ((2 * p1) + (-p0 + p2) * f + (2 * p0 - 5 * p1 + 4 * p2 - p3) * f**2 + (-p0 + 3 * p1 - 3 * p2 + p3) * f**3)


def _is_free(xy: np.ndarray, spec: SceneSpec, wall_margin: float, clearance: float) -> bool:
    W, D = spec.size[:2]
    if (xy[:, 0] < wall_margin).any() or (xy[:, 0] > W - wall_margin).any():
        return False
    if (xy[:, 1] < wall_margin).any() or (xy[:, 1] > D - wall_margin).any():
        return False
    discs = obstacle_discs(spec)
    if len(discs):
        dist = np.linalg.norm(xy[:, None, :] - discs[None, :, :2], axis=-1) - discs[None, :, 2]
        if (dist < clearance).any():
            return False
    return True


def look_rotation(yaw, pitch, roll) -> np.ndarray:
    """[F] angles -> [F, 3, 3] OpenCV camera-to-world rotations (columns: right, down, forward) in
    the z-up world: yaw about z from +x, pitch up positive, roll about the forward axis."""
    f = np.stack([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)], -1)
    right = np.cross(f, np.array([0.0, 0.0, 1.0]))
    right /= np.linalg.norm(right, axis=-1, keepdims=True)
    down = np.cross(f, right)
    c, s = np.cos(roll)[:, None], np.sin(roll)[:, None]
    right, down = c * right + s * down, -s * right + c * down
    return np.stack([right, down, f], axis=-1)


def sample_trajectory(spec: SceneSpec, rng: np.random.Generator, num_frames: int,
                      wall_margin: float = 0.9, clearance: float = 0.8, max_tries: int = 400):
    """A walkthrough: [F, 4, 4] c2w. Returns None if no free path was found (caller removes objects)."""
    W, D = spec.size[:2]
    for _ in range(max_tries):
        num_ctrl = int(rng.integers(3, 5))
        start = rng.uniform([wall_margin, wall_margin], [W - wall_margin, D - wall_margin])
        heading = rng.uniform(0, 2 * np.pi)
        pts = [start]
        for _ in range(num_ctrl - 1):
            heading += rng.normal(0, 0.7)
            step = rng.uniform(0.5, 1.1)
            pts.append(pts[-1] + step * np.array([np.cos(heading), np.sin(heading)]))
        ctrl = np.array(pts)
        dense = _catmull_rom(ctrl, 400)
        if not _is_free(dense, spec, wall_margin, clearance):
            continue
        # Constant speed along the path.
        seg = np.linalg.norm(np.diff(dense, axis=0), axis=-1)
        arc = np.concatenate([[0.0], np.cumsum(seg)])
        s = np.linspace(0, arc[-1], num_frames)
        xy = np.stack([np.interp(s, arc, dense[:, 0]), np.interp(s, arc, dense[:, 1])], -1)
        # Look at a point that drifts across the room (a slow pan), from wherever the camera is:
        # views then see the room's depth and furniture rather than a wall at arm's length.
        tau = np.linspace(0, 1, num_frames)
        ease = 3 * tau**2 - 2 * tau**3
        centre = spec.size[:2] / 2
        look_a = centre + rng.uniform(-1, 1, 2) * spec.size[:2] * 0.35
        look_b = centre + rng.uniform(-1, 1, 2) * spec.size[:2] * 0.35
        look = look_a + ease[:, None] * (look_b - look_a)
        to_look = look - xy
        yaw = np.unwrap(np.arctan2(to_look[:, 1], to_look[:, 0]))
        yaw = yaw + 0.04 * np.sin(2 * np.pi * (rng.uniform(0.5, 1.5) * tau + rng.random()))
        if (np.linalg.norm(to_look, axis=-1) < 0.6).any():  # would spin around the look point
            continue
        pitch = rng.uniform(-0.3, 0.05) + 0.05 * np.sin(2 * np.pi * (tau + rng.random()))
        roll = rng.normal(0, 0.02) + 0.01 * np.sin(2 * np.pi * (2 * tau + rng.random()))
        height = rng.uniform(1.2, 1.7) + 0.03 * np.sin(2 * np.pi * (rng.uniform(1, 3) * tau + rng.random()))
        c2w = np.tile(np.eye(4), (num_frames, 1, 1))
        c2w[:, :3, :3] = look_rotation(yaw, pitch, roll)
        c2w[:, :3, 3] = np.concatenate([xy, height[:, None]], axis=-1)
        return c2w
    return None
