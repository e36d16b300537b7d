"""Plane-sweep cost volume (DepthSplat `matching.py` warp_with_pose_depth_candidates and the
correlation of `mv_unimatch.py`): each view's features are correlated with its neighbours' features
warped at every depth candidate, sum_c / sqrt(C), averaged over neighbours (paper sec. 2.1).

Warping is float32 whatever the image-side dtype (the paper's deployed precision, B.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def grid_sample_bilinear_zeros(feat, x, y):
    """F.grid_sample(mode='bilinear', padding_mode='zeros', align_corners=True) with pixel coordinates.

    feat [N, H, W, C]; x, y [N, ...] pixel coordinates -> [N, ..., C]."""
    n, h, w, c = feat.shape
    flat = feat.reshape(n, h * w, c)
    x0, y0 = jnp.floor(x), jnp.floor(y)
    out = 0.0
    for dx in (0, 1):
        for dy in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            wgt = (1 - jnp.abs(x - xi)) * (1 - jnp.abs(y - yi))
            valid = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
            idx = (jnp.clip(yi, 0, h - 1) * w + jnp.clip(xi, 0, w - 1)).astype(jnp.int32)
            g = jnp.take_along_axis(flat, idx.reshape(n, -1, 1), axis=1).reshape(idx.shape + (c,))
            out = out + g * jnp.where(valid, wgt, 0.0)[..., None]
    return out


def plane_sweep_cost_volume(ref, nbr, k, ref_c2w, nbr_c2w, inv_depth, clamp_min_depth: float = 1e-3):
    """Correlation cost volume.

    ref [N, h, w, C] features of each view; nbr [N, K, h, w, C] its K neighbours' features;
    k [N, 3, 3] pixel intrinsics at this resolution (shared by the view and its neighbours, as the
    official code uses the reference view's); ref_c2w [N, 4, 4], nbr_c2w [N, K, 4, 4];
    inv_depth [N, D, h, w] candidates (inverse depth). -> [N, h, w, D].
    """
    n, h, w, c = ref.shape
    kk = nbr.shape[1]
    d = inv_depth.shape[1]
    f32 = jnp.float32
    hp = jax.lax.Precision.HIGHEST
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=f32), jnp.arange(w, dtype=f32), indexing="ij")
    pix = jnp.stack([xs, ys, jnp.ones_like(xs)], 0).reshape(3, h * w)
    kf = k.astype(f32)
    rays = jnp.einsum("nij,jp->nip", jnp.linalg.inv(kf), pix, precision=hp)  # [N, 3, hw]
    pose = jnp.einsum("nkij,njl->nkil", jnp.linalg.inv(nbr_c2w.astype(f32)), ref_c2w.astype(f32),
                      precision=hp)  # ref camera -> neighbour camera, [N, K, 4, 4]
    rot_rays = jnp.einsum("nkij,njp->nkip", pose[..., :3, :3], rays, precision=hp)  # [N, K, 3, hw]
    depth = (1.0 / inv_depth.astype(f32)).reshape(n, 1, 1, d, h * w)
    pts = rot_rays[:, :, :, None, :] * depth + pose[:, :, :3, 3][..., None, None]  # [N, K, 3, D, hw]
    proj = jnp.einsum("nij,nkjdp->nkidp", kf, pts, precision=hp)
    z = jnp.maximum(proj[:, :, 2], clamp_min_depth)
    px, py = proj[:, :, 0] / z, proj[:, :, 1] / z  # [N, K, D, hw]
    warped = grid_sample_bilinear_zeros(nbr.reshape(n * kk, h, w, c).astype(f32),
                                        px.reshape(n * kk, d, h * w), py.reshape(n * kk, d, h * w))
    warped = warped.reshape(n, kk, d, h, w, c)
    corr = jnp.einsum("nhwc,nkdhwc->nkhwd", ref.astype(f32), warped, precision=hp) / jnp.sqrt(f32(c))
    return corr.mean(axis=1)
