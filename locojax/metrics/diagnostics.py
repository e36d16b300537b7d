"""Model diagnostics the papers report besides image quality.

* LocusGS token-level Gaussian dispersion C_centroid (the LocusGS paper, eq. 12, Table 3).
* LoCoSplat depth-branch health (the LoCoSplat paper, Table 13): over the scale-0 plane-sweep matching
  distribution p [..., D] of every pixel, the normalized entropy H / log D, w90 (bins around the argmax
  holding 90% of the mass) and the modal-bin share (pixels whose argmax is the most frequent bin), plus
  the median relative error of the multi-view depth against the final fused depth. Collapsed heads
  read H/log D = 0, w90 = 1, modal share 100%; healthy ones ~0.4-0.5, 5-14 bins, 7-19%.

Per-pixel statistics are jittable (`depth_branch_stats`); pooling over scenes (medians, the modal bin)
is numpy (`summarize_depth_branch`), since the paper pools all pixels of 50 scenes before the median.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


def centroid_dispersion(gaussian_means):
    """C_centroid (eq. 12): mean distance of each token's Gaussians to the token's centroid.

    Args:
      gaussian_means: [..., N, K, 3], the K Gaussian centres decoded from each of N tokens.
    Returns:
      [...] = 1/(N K) sum_i sum_k || mu_ik - mean_k mu_ik ||_2. Lower is tighter.
    """
    if gaussian_means.ndim < 3 or gaussian_means.shape[-1] != 3:
        raise ValueError(f"centroid_dispersion: expected [..., N, K, 3] means, got {gaussian_means.shape}")
    centroid = jnp.mean(gaussian_means, axis=-2, keepdims=True)  # mu-bar_i
    dist = jnp.linalg.norm(gaussian_means - centroid, axis=-1)  # [..., N, K]
    return jnp.mean(dist, axis=(-2, -1))


@functools.partial(jax.jit, static_argnames="eps")
def normalized_entropy(probs, eps: float = 1e-12):
    """H(p) / log D per distribution: [..., D] -> [...] in [0, 1] (0 = one-hot, 1 = uniform)."""
    d = probs.shape[-1]
    p = probs / jnp.sum(probs, axis=-1, keepdims=True)
    h = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.maximum(p, eps)), 0.0), axis=-1)
    return h / jnp.log(float(d))


@functools.partial(jax.jit, static_argnames="mass")
def mass_width(probs, mass: float = 0.9):
    """w90: bins in the smallest window around the argmax holding `mass` of the probability.

    The window grows symmetrically, [a - r, a + r] clipped to [0, D - 1], r = 0, 1, ...; its width is
    the number of bins it covers after clipping (1 for a one-hot). [..., D] -> [...] int32.
    """
    d = probs.shape[-1]
    p = probs / jnp.sum(probs, axis=-1, keepdims=True)
    a = jnp.argmax(p, axis=-1)[..., None]  # [..., 1]
    cdf = jnp.concatenate([jnp.zeros_like(p[..., :1]), jnp.cumsum(p, axis=-1)], axis=-1)  # [..., D + 1]
    r = jnp.arange(d)
    lo = jnp.clip(a - r, 0, d - 1)
    hi = jnp.clip(a + r, 0, d - 1)
    window_mass = jnp.take_along_axis(cdf, hi + 1, axis=-1) - jnp.take_along_axis(cdf, lo, axis=-1)
    # Small tolerance so a window holding exactly `mass` (up to float error) counts as enough.
    enough = window_mass >= mass - 1e-6
    r_min = jnp.argmax(enough, axis=-1)  # first radius with enough mass; r = D - 1 covers all
    a = a[..., 0]
    return (jnp.minimum(a + r_min, d - 1) - jnp.maximum(a - r_min, 0) + 1).astype(jnp.int32)


@jax.jit
def depth_branch_stats(probs):
    """Per-pixel health statistics of a matching distribution [..., D].

    Returns a dict of [...] arrays: "entropy" (H / log D), "w90" (int32), "argmax" (int32).
    """
    return {
        "entropy": normalized_entropy(probs),
        "w90": mass_width(probs, 0.9),
        "argmax": jnp.argmax(probs, axis=-1).astype(jnp.int32),
    }


def summarize_depth_branch(stats, num_bins: int, mv_depth=None, final_depth=None) -> dict:
    """Pool per-pixel stats (one dict or a list of dicts from `depth_branch_stats`) as Table 13 does.

    Returns {"entropy_median", "w90_median", "modal_bin", "modal_bin_share"} and, when both depths
    [...] are given, "mv_depth_rel_err_median" = median |mv - final| / final over pixels with final > 0.
    """
    stats = [stats] if isinstance(stats, dict) else list(stats)
    pool = lambda k: np.concatenate([np.asarray(s[k]).reshape(-1) for s in stats])
    argmax = pool("argmax")
    counts = np.bincount(argmax, minlength=num_bins)
    out = {
        "entropy_median": float(np.median(pool("entropy"))),
        "w90_median": float(np.median(pool("w90"))),
        "modal_bin": int(np.argmax(counts)),
        "modal_bin_share": float(counts.max() / argmax.size),
    }
    if (mv_depth is None) != (final_depth is None):
        raise ValueError("summarize_depth_branch: pass both mv_depth and final_depth, or neither")
    if mv_depth is not None:
        mv = np.asarray(mv_depth, np.float64).reshape(-1)
        fin = np.asarray(final_depth, np.float64).reshape(-1)
        ok = fin > 0
        out["mv_depth_rel_err_median"] = float(np.median(np.abs(mv[ok] - fin[ok]) / fin[ok]))
    return out
