"""Gaussians and cameras in the forms web viewers take (viser's `add_gaussian_splats`,
`add_camera_frustum` and client cameras, all OpenCV-axis camera-to-world as (wxyz, position)).

Colours are the SH degree-0 term as the rasterizer evaluates it (0.5 + C0 * dc, clamped at 0, as
gsplat's `spherical_harmonics` plus 3DGS's +0.5 offset): view-dependent terms are left to the
render panel, which shows the project's own rasterizer.
"""

from __future__ import annotations

import numpy as np

from locojax.render.camera_path import rotation_to_quaternion

SH_C0 = 0.28209479177387814  # 1 / (2 sqrt(pi)), the degree-0 real SH constant


def quaternion_to_matrix(wxyz: np.ndarray) -> np.ndarray:
    """[..., 4] quaternions (w, x, y, z; normalised here) -> [..., 3, 3] rotation matrices."""
    q = np.asarray(wxyz, np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def splat_arrays(means, quats, scales, opacities, sh) -> dict:
    """One scene's Gaussians (no batch axis) -> viser's splat arrays.

    Args:
      means [N, 3], quats [N, 4] (w, x, y, z), scales [N, 3] (standard deviations), opacities [N],
      sh [N, K, 3].
    Returns:
      {"centers" [N, 3], "covariances" [N, 3, 3] = R diag(s^2) R^T, "rgbs" [N, 3] in [0, 1],
       "opacities" [N, 1]} as float32.
    """
    R = quaternion_to_matrix(quats)
    s2 = np.asarray(scales, np.float64) ** 2
    cov = np.einsum("nij,nj,nkj->nik", R, s2, R)
    rgb = np.clip(0.5 + SH_C0 * np.asarray(sh, np.float64)[:, 0, :], 0.0, 1.0)
    return {"centers": np.asarray(means, np.float32), "covariances": cov.astype(np.float32),
            "rgbs": rgb.astype(np.float32), "opacities": np.asarray(opacities, np.float32).reshape(-1, 1)}


def c2w_to_wxyz_position(c2w: np.ndarray):
    """[4, 4] OpenCV camera-to-world -> ((w, x, y, z), position), viser's camera pose."""
    c2w = np.asarray(c2w, np.float64)
    q = rotation_to_quaternion(c2w[:3, :3])
    return (q if q[0] >= 0 else -q), c2w[:3, 3].copy()


def wxyz_position_to_c2w(wxyz, position) -> np.ndarray:
    """viser's camera pose -> [4, 4] OpenCV camera-to-world."""
    c2w = np.eye(4)
    c2w[:3, :3] = quaternion_to_matrix(np.asarray(wxyz, np.float64))
    c2w[:3, 3] = np.asarray(position, np.float64)
    return c2w


def intrinsics_from_fov(fov_y: float, width: int, height: int) -> np.ndarray:
    """Normalised intrinsics [3, 3] of a centred pinhole with vertical field of view `fov_y` (radians)
    rendered at width x height pixels (square pixels)."""
    fy = 0.5 / np.tan(0.5 * fov_y)          # in units of the image height
    fx = fy * height / width                 # the same focal length in units of the width
    return np.array([[fx, 0.0, 0.5], [0.0, fy, 0.5], [0.0, 0.0, 1.0]], np.float32)
