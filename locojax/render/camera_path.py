"""Camera paths for novel-view videos, built from a scene's context cameras (host-side numpy).

    c2w, K = orbit_path(context_c2w, context_K, num_frames)        # [F, 4, 4], [F, 3, 3]
    c2w, K = interpolate_path(context_c2w, context_K, num_frames)

Inputs: `context_c2w` [V, 4, 4] OpenCV camera-to-world, `context_K` [V, 3, 3] intrinsics (normalized or
in pixels: they are only averaged/interpolated). Outputs have the same conventions.

* `orbit`: the mean context camera (mean centre, rotation of the mean forward/up axes) moved on a
  circle in its own image plane, always looking at a focus point on its optical axis. The radius is
  the spread of the context centres (so the video stays inside the views the model saw); the focus
  depth is where the context optical axes come closest together (least squares), or, for parallel
  axes (forward-facing captures), the distance between the outermost context cameras. Closed loop.
* `interpolate`: through the context cameras in their given order, positions linearly and rotations
  by quaternion slerp (shortest arc), intrinsics linearly; F frames over the V - 1 segments.
"""

from __future__ import annotations

import numpy as np

PATHS = ("orbit", "interpolate")


def _normalize(v, eps=1e-12):
    return v / max(float(np.linalg.norm(v)), eps)


def look_at(center, focus, up_hint):
    """OpenCV c2w [4, 4] at `center` looking at `focus` (z forward), y down roughly along -up_hint."""
    z = _normalize(np.asarray(focus, np.float64) - center)
    x = np.cross(-np.asarray(up_hint, np.float64), z)  # OpenCV: y is down, so "up" is -y
    if np.linalg.norm(x) < 1e-8:  # up parallel to the view direction: any perpendicular will do
        x = np.cross(np.array([0.0, 0.0, 1.0]) if abs(z[2]) < 0.9 else np.array([1.0, 0.0, 0.0]), z)
    x = _normalize(x)
    y = np.cross(z, x)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = x, y, z, center
    return c2w


def _axes_closest_point(centers, forwards):
    """Least-squares point nearest to the lines c_i + t f_i, or None when the lines are ~parallel."""
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for c, f in zip(centers, forwards):
        p = np.eye(3) - np.outer(f, f)  # projector onto the plane normal to f
        a += p
        b += p @ c
    if np.linalg.cond(a) > 1e6:
        return None
    return np.linalg.solve(a, b)


def orbit_path(context_c2w, context_K, num_frames: int, radius_scale: float = 1.0):
    """A closed circle of `num_frames` cameras around the mean context camera. Returns (c2w [F, 4, 4],
    K [F, 3, 3]) in float32."""
    c2w = np.asarray(context_c2w, np.float64)
    centers, forwards, downs = c2w[:, :3, 3], c2w[:, :3, 2], c2w[:, :3, 1]
    center = centers.mean(0)
    forward = _normalize(forwards.mean(0))
    up = -_normalize(downs.mean(0))
    spread = float(np.max(np.linalg.norm(centers - center, axis=-1))) if len(centers) > 1 else 0.0
    baseline = float(np.max(np.linalg.norm(centers[:, None] - centers[None], axis=-1)))
    focus = _axes_closest_point(centers, [_normalize(f) for f in forwards])
    depth = float(np.dot(focus - center, forward)) if focus is not None else -1.0
    if not depth > 1e-6:  # parallel or diverging axes: look one baseline ahead (1 if all coincide)
        depth = baseline if baseline > 1e-6 else 1.0
    radius = radius_scale * (spread if spread > 1e-6 else 0.1 * depth)
    right = _normalize(np.cross(forward, -up))  # OpenCV x = y x z with y = -up, z = forward
    true_up = np.cross(right, forward)
    focus_point = center + depth * forward
    theta = 2.0 * np.pi * np.arange(num_frames) / num_frames
    out = np.stack([look_at(center + radius * (np.cos(t) * right + np.sin(t) * true_up), focus_point, up)
                    for t in theta])
    k = np.broadcast_to(np.asarray(context_K, np.float64).mean(0), (num_frames, 3, 3))
    return out.astype(np.float32), np.array(k, np.float32)


def rotation_to_quaternion(r):
    """[3, 3] rotation -> unit quaternion (w, x, y, z) (Shepperd's method, numerically stable)."""
    r = np.asarray(r, np.float64)
    t = np.trace(r)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = np.zeros(4)
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def quaternion_to_rotation(q):
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def slerp(q0, q1, t: float):
    """Spherical linear interpolation of unit quaternions along the shorter arc."""
    q0, q1 = np.asarray(q0, np.float64), np.asarray(q1, np.float64)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # q and -q are the same rotation: take the short way round
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly equal: lerp is exact to float precision and avoids 0/0
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    angle = np.arccos(dot)
    return (np.sin((1 - t) * angle) * q0 + np.sin(t * angle) * q1) / np.sin(angle)


def interpolate_path(context_c2w, context_K, num_frames: int):
    """`num_frames` cameras from the first to the last context camera through the others in order.
    Returns (c2w [F, 4, 4], K [F, 3, 3]) in float32; frame 0 and frame F-1 are the end cameras."""
    c2w = np.asarray(context_c2w, np.float64)
    ks = np.asarray(context_K, np.float64)
    v = c2w.shape[0]
    if v == 1:
        return (np.broadcast_to(c2w, (num_frames, 4, 4)).astype(np.float32),
                np.broadcast_to(ks, (num_frames, 3, 3)).astype(np.float32))
    quats = [rotation_to_quaternion(m[:3, :3]) for m in c2w]
    out_c2w, out_k = [], []
    for s in np.linspace(0.0, v - 1.0, num_frames):
        i = min(int(np.floor(s)), v - 2)
        t = s - i
        m = np.eye(4)
        m[:3, :3] = quaternion_to_rotation(slerp(quats[i], quats[i + 1], t))
        m[:3, 3] = (1 - t) * c2w[i, :3, 3] + t * c2w[i + 1, :3, 3]
        out_c2w.append(m)
        out_k.append((1 - t) * ks[i] + t * ks[i + 1])
    return np.stack(out_c2w).astype(np.float32), np.stack(out_k).astype(np.float32)


def camera_path(kind: str, context_c2w, context_K, num_frames: int):
    """Dispatch on `kind` in PATHS; a ValueError names the valid ones."""
    if num_frames < 1:
        raise ValueError(f"--frames={num_frames}: need at least one frame")
    if kind == "orbit":
        return orbit_path(context_c2w, context_K, num_frames)
    if kind == "interpolate":
        return interpolate_path(context_c2w, context_K, num_frames)
    raise ValueError(f"--path={kind!r}: expected one of {', '.join(PATHS)}")
