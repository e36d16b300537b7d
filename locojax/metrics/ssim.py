"""SSIM exactly as pixelSplat's evaluation computes it.

pixelSplat `compute_ssim` calls scikit-image
  structural_similarity(gt, pred, win_size=11, gaussian_weights=True, channel_axis=..., data_range=1.0)
with its other defaults: Gaussian window sigma = 1.5 truncated at 3.5 sigma (radius 5: 11 taps),
K1 = 0.01, K2 = 0.03, sample covariance (variances scaled by NP / (NP - 1), NP = 11**2), the SSIM map
averaged after cropping (win_size - 1) / 2 = 5 pixels from every border, then averaged over channels.
The crop removes exactly the pixels whose window touches skimage's 'reflect' padding, so a 'valid'
separable filter reproduces the cropped map without any padding.

`padding="same"` is the other SSIM of the Gaussian-splatting literature, the training loss of 3DGS
(`gaussian-splatting/utils/loss_utils.py`) and of fused-ssim (`fused_ssim(img1, img2, padding="same")`,
used by TokenGS/LocusGS): the same 11-tap window, zero padding of 5 pixels so the map keeps the image
size, population (not sample) covariance, and the mean over every pixel. (fused-ssim's own 'valid'
crops that map by 5 pixels but keeps the population covariance, so it differs from skimage's by the
121/120 covariance factor; 'valid' here is always skimage's.)
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

WIN_SIZE = 11
SIGMA = 1.5
K1, K2 = 0.01, 0.03


def _gaussian_taps(sigma: float = SIGMA, truncate: float = 3.5) -> tuple[float, ...]:
    """scipy.ndimage's 1D Gaussian kernel: radius int(truncate * sigma + 0.5), normalised to sum 1."""
    radius = int(truncate * sigma + 0.5)
    w = [math.exp(-0.5 * (x / sigma) ** 2) for x in range(-radius, radius + 1)]
    s = sum(w)
    return tuple(v / s for v in w)


_TAPS = _gaussian_taps()
assert len(_TAPS) == WIN_SIZE


def _correlate_valid(x, axis: int):
    """Correlate with the Gaussian taps along `axis` ('valid': the output is 10 samples shorter)."""
    n = x.shape[axis] - len(_TAPS) + 1
    out = 0.0
    for k, w in enumerate(_TAPS):  # 11 shifted multiply-adds: XLA fuses them into one loop
        out = out + w * _slice(x, axis, k, n)
    return out


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _valid_filter(x, axis: int):
    return _correlate_valid(x, axis)


def _valid_filter_fwd(x, axis):
    return _correlate_valid(x, axis), None


def _valid_filter_bwd(axis, _, cotangent):
    # The adjoint of a 'valid' correlation is a 'full' correlation with the reversed taps; the Gaussian
    # is symmetric, so zero-pad the cotangent by 10 on each side and correlate 'valid' again. This
    # is 11 fused multiply-adds, where autodiff of the slices would build 11 padded full-size arrays.
    pad = [(0, 0)] * cotangent.ndim
    pad[axis] = (len(_TAPS) - 1, len(_TAPS) - 1)
    return (_correlate_valid(jnp.pad(cotangent, pad), axis),)


_valid_filter.defvjp(_valid_filter_fwd, _valid_filter_bwd)


def _slice(x, axis, start, size):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, start + size)
    return x[tuple(idx)]


PADDINGS = ("valid", "same")
_HALF = (WIN_SIZE - 1) // 2


def _ssim_map_planar(x, y, data_range, padding="valid"):
    """SSIM map of planar images [..., C, H, W] -> [..., C, H - 10, W - 10] ('valid') or
    [..., C, H, W] ('same').

    Planar (W minor) layout: the 11-tap filters then run along contiguous memory, ~2x faster on CPU
    than filtering [..., H, W, 3] with its 3-wide minor axis.
    """
    # Filter the five moment images in one pass: stack on a new leading axis.
    moments = jnp.stack([x, y, x * x, y * y, x * y])
    if padding == "same":  # zero padding (3DGS/fused-ssim): the window's weights outside count as 0
        pad = [(0, 0)] * (moments.ndim - 2) + [(_HALF, _HALF)] * 2
        moments = jnp.pad(moments, pad)
    mu_x, mu_y, e_xx, e_yy, e_xy = _valid_filter(_valid_filter(moments, moments.ndim - 2), moments.ndim - 1)
    # skimage: use_sample_covariance=True; 3DGS/fused-ssim: population covariance.
    cov_norm = WIN_SIZE**2 / (WIN_SIZE**2 - 1.0) if padding == "valid" else 1.0
    var_x = cov_norm * (e_xx - mu_x * mu_x)
    var_y = cov_norm * (e_yy - mu_y * mu_y)
    cov_xy = cov_norm * (e_xy - mu_x * mu_y)
    c1 = (K1 * data_range) ** 2
    c2 = (K2 * data_range) ** 2
    num = (2.0 * mu_x * mu_y + c1) * (2.0 * cov_xy + c2)
    den = (mu_x * mu_x + mu_y * mu_y + c1) * (var_x + var_y + c2)
    return num / den


def _planar(img):
    return jnp.moveaxis(jnp.asarray(img).astype(jnp.float32), -1, -3)


def _check_padding(padding):
    if padding not in PADDINGS:
        raise ValueError(f"ssim: padding={padding!r}; expected one of {PADDINGS}")


def ssim_map(pred, target, *, data_range: float = 1.0, padding: str = "valid"):
    """Per-pixel SSIM: [..., H, W, C] -> [..., H - 10, W - 10, C] ('valid': skimage's cropped region)
    or [..., H, W, C] ('same': 3DGS/fused-ssim zero padding; see the module docstring)."""
    _check_padding(padding)
    return jnp.moveaxis(_ssim_map_planar(_planar(pred), _planar(target), data_range, padding), -3, -1)


def ssim(pred, target, *, data_range: float = 1.0, padding: str = "valid"):
    """Mean SSIM per image: [..., H, W, C] -> [...]. H, W >= 11.

    padding="valid" (default): skimage/pixelSplat semantics, the evaluation metric. padding="same":
    3DGS/fused-ssim semantics (zero padding, population covariance), the TokenGS/LocusGS loss.
    Images are not clipped (pixelSplat does not clip before SSIM). Differentiable in both arguments.
    """
    _check_padding(padding)
    if pred.shape != target.shape:
        raise ValueError(f"ssim: pred {pred.shape} and target {target.shape} differ in shape")
    if pred.ndim < 3:
        raise ValueError(f"ssim: expected [..., H, W, C] images, got shape {pred.shape}")
    if min(pred.shape[-3:-1]) < WIN_SIZE:
        raise ValueError(f"ssim: images {pred.shape[-3:-1]} are smaller than the {WIN_SIZE}x{WIN_SIZE} window")
    return _mean_ssim(pred, target, data_range, padding)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _mean_ssim(pred, target, data_range, padding):
    # Mean over (C, H', W') equals skimage's mean over channels of per-channel means (equal sizes).
    return jnp.mean(_ssim_map_planar(_planar(pred), _planar(target), data_range, padding), axis=(-3, -2, -1))
