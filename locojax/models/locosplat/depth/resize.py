"""torch.nn.functional.interpolate as static [out, in] weight matrices applied per axis (NHWC).

Written as matrices (numpy, built at trace time) because the official code's resizes are bilinear
with align_corners=True and DINOv2's position-embedding resize is torch bicubic (A = -0.75, clamped
borders, no antialias) with an explicit scale factor: `jax.image.resize` matches neither.
"""

from __future__ import annotations

import math
from typing import Optional

import jax.numpy as jnp
import numpy as np


def _cubic(t: float, a: float = -0.75) -> np.ndarray:
    """torch's upsample_bicubic2d weights for taps at offsets -1, 0, 1, 2 (fraction t)."""
    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.array([far(t + 1), near(t), near(1 - t), far(2 - t)])


def resize_matrix(n_in: int, n_out: int, mode: str, align_corners: bool,
                  scale_factor: Optional[float] = None) -> np.ndarray:
    """[n_out, n_in] float64 matrix of F.interpolate along one axis.

    mode "bilinear" or "bicubic"; `scale_factor` given = torch's scale_factor argument (its
    reciprocal maps destination to source when align_corners is False)."""
    m = np.zeros((n_out, n_in))
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else n_in / n_out
    for o in range(n_out):
        if align_corners:
            src = o * scale
        else:
            src = scale * (o + 0.5) - 0.5
        if mode == "bilinear":
            if not align_corners:
                src = max(src, 0.0)
            i0 = min(int(math.floor(src)), n_in - 1)
            i1 = min(i0 + 1, n_in - 1)
            t = src - i0
            m[o, i0] += 1 - t
            m[o, i1] += t
        elif mode == "bicubic":
            i0 = int(math.floor(src))
            w = _cubic(src - i0)
            for k in range(4):
                m[o, min(max(i0 - 1 + k, 0), n_in - 1)] += w[k]
        else:
            raise ValueError(f"resize mode {mode!r}")
    return m


def resize_hw(x, out_hw, mode: str = "bilinear", align_corners: bool = True, scale_factor=None):
    """x [..., H, W, C] -> [..., H', W', C] as F.interpolate on NCHW. `scale_factor` (pair or None)
    only matters for align_corners=False."""
    h, w = x.shape[-3], x.shape[-2]
    sf = scale_factor if scale_factor is not None else (None, None)
    mh = jnp.asarray(resize_matrix(h, out_hw[0], mode, align_corners, sf[0]), jnp.float32)
    mw = jnp.asarray(resize_matrix(w, out_hw[1], mode, align_corners, sf[1]), jnp.float32)
    hp = jnp.einsum("oh,...hwc->...owc", mh.astype(x.dtype), x, precision="highest")
    return jnp.einsum("pw,...owc->...opc", mw.astype(x.dtype), hp, precision="highest")


def upsample_nearest(x, factor: int):
    """x [..., H, W, C] -> [..., H*f, W*f, C] (F.interpolate mode='nearest', integer factor)."""
    return jnp.repeat(jnp.repeat(x, factor, axis=-3), factor, axis=-2)
