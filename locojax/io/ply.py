"""Standard 3D Gaussian Splatting .ply files (the INRIA layout read by common viewers).

One binary little-endian vertex element with float32 properties, in this order:
  x y z, nx ny nz (zeros), f_dc_0..2, f_rest_0..(3*(K-1)-1), opacity, scale_0..2, rot_0..3
where
  * f_dc is SH coefficient 0 per channel, f_rest the remaining K-1 coefficients stored
    CHANNEL-MAJOR (all of red's, then green's, then blue's), as INRIA's `save_ply` flattens
    features_rest after transposing it to [N, 3, K-1];
  * opacity is stored as a logit (the viewer applies a sigmoid), scale_* as log (the viewer
    exponentiates), rot_* as a quaternion w x y z (normalized here).
The SH basis and ordering are the same as gsplat's / ours, so coefficients are copied unchanged.
"""

from __future__ import annotations

import os

import numpy as np

from locojax.types import Gaussians

_OPACITY_EPS = 1e-7  # logit of exactly 0 or 1 is infinite; viewers expect finite values


def _attribute_names(num_rest: int) -> list[str]:
    names = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    names += [f"f_rest_{i}" for i in range(num_rest)]
    names += ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    return names


def gaussians_to_ply_array(g: Gaussians) -> np.ndarray:
    """One scene's Gaussians ([N, ...], no batch axis) -> the structured array of the vertex element."""
    means = np.asarray(g.means, np.float32)
    if means.ndim != 2:
        raise ValueError(f"write_ply expects one scene's Gaussians (means [N, 3]); got means {means.shape}")
    n = means.shape[0]
    sh = np.asarray(g.sh, np.float32)  # [N, K, 3]
    k = sh.shape[1]
    f_dc = sh[:, 0, :]
    f_rest = np.transpose(sh[:, 1:, :], (0, 2, 1)).reshape(n, 3 * (k - 1))  # channel-major
    opac = np.clip(np.asarray(g.opacities, np.float64), _OPACITY_EPS, 1.0 - _OPACITY_EPS)
    opacity_logit = np.log(opac / (1.0 - opac)).astype(np.float32)[:, None]
    log_scales = np.log(np.asarray(g.scales, np.float32))
    quats = np.asarray(g.quats, np.float32)
    quats = quats / np.linalg.norm(quats, axis=-1, keepdims=True)
    columns = np.concatenate(
        [means, np.zeros_like(means), f_dc, f_rest, opacity_logit, log_scales, quats], axis=1
    ).astype(np.float32)
    names = _attribute_names(3 * (k - 1))
    out = np.empty(n, dtype=[(name, "f4") for name in names])
    for i, name in enumerate(names):
        out[name] = columns[:, i]
    return out


def write_ply(path: str, gaussians: Gaussians) -> None:
    """Write one scene's Gaussians ([N, ...]) to `path` (binary .ply, INRIA layout)."""
    from plyfile import PlyData, PlyElement

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    element = PlyElement.describe(gaussians_to_ply_array(gaussians), "vertex")
    PlyData([element], text=False, byte_order="<").write(path)


def read_ply(path: str) -> Gaussians:
    """Read an INRIA-layout .ply into Gaussians (numpy float32; opacity sigmoid-ed, scales exp-ed)."""
    from plyfile import PlyData

    ply = PlyData.read(path)
    if "vertex" not in ply:
        raise ValueError(f"{path}: no 'vertex' element; not a 3DGS .ply")
    v = ply["vertex"].data
    names = v.dtype.names
    for required in ("x", "y", "z", "f_dc_0", "opacity", "scale_0", "rot_0"):
        if required not in names:
            raise ValueError(f"{path}: missing property {required!r}; not a 3DGS .ply")
    col = lambda *ns: np.stack([np.asarray(v[n], np.float32) for n in ns], axis=-1)  # noqa: E731
    rest = sorted((n for n in names if n.startswith("f_rest_")), key=lambda n: int(n.split("_")[-1]))
    n = len(v)
    k_minus_1 = len(rest) // 3
    if len(rest) != 3 * k_minus_1 or int(round((k_minus_1 + 1) ** 0.5)) ** 2 != k_minus_1 + 1:
        raise ValueError(f"{path}: {len(rest)} f_rest_* properties is not 3 * ((degree + 1)^2 - 1)")
    f_dc = col("f_dc_0", "f_dc_1", "f_dc_2")
    f_rest = col(*rest).reshape(n, 3, k_minus_1).transpose(0, 2, 1) if rest else np.zeros((n, 0, 3), np.float32)
    sh = np.concatenate([f_dc[:, None, :], f_rest], axis=1)
    opacity = 1.0 / (1.0 + np.exp(-np.asarray(v["opacity"], np.float64)))
    return Gaussians(
        means=col("x", "y", "z"),
        quats=col("rot_0", "rot_1", "rot_2", "rot_3"),
        scales=np.exp(col("scale_0", "scale_1", "scale_2")),
        opacities=opacity.astype(np.float32),
        sh=sh.astype(np.float32),
    )
