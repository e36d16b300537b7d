"""Per-scene depth-branch health (the LoCoSplat paper, App. D, Table 13), jittable, each value [B].

    diags = table13_diagnostics(match_prob0, coarse_depth, final_depth, intrinsics, c2w, near, far,
                                num_neighbours=2)

Table 13's columns, for every scene of the batch (the model returns them as aux["diag/<name>"], the
evaluator averages them over scenes):

  scale0_entropy      median over the scene's scale-0 pixels of H(p) / log D
  scale0_w90          median of w90: bins of the smallest window around the argmax holding 90% of
                      the mass (`locojax.metrics.diagnostics.mass_width`)
  scale0_modal_share  share of the scene's scale-0 pixels whose argmax is the scene's most frequent bin
  delta_u_px          Delta u: median per-candidate disparity in scale-0 feature pixels (eq. 7, D.2)
  mv_depth_rel_err    median |D_mv - D| / D of the multi-view depth against the final fused depth

Choices where the paper is silent (Table 13 caption, D.2, D.3):
* Pooling. The paper pools "all pixels" of the first 50 scenes before one median / one modal bin; a
  per-scene [B] value cannot do that, so each scene is pooled over its own V x h x w scale-0 pixels and
  the evaluator reports the mean over scenes of these per-scene statistics. For a collapsed head
  (the same one-hot everywhere) both read 0 / 1 / 100%; for a healthy one the per-scene modal share is
  an upper bound of the pooled one (a scene's most frequent bin is chosen per scene).
* Delta u is Table 13's "exact" disparity, not eq. 7's frame-spacing proxy: every scale-0 pixel of every
  context view is lifted at each of the D candidates (linear in inverse depth over [1/far, 1/near],
  as the cost volume) and projected into each of its cost-volume neighbours (the same nearest cameras,
  `nearest_views`) with the cost volume's pixel convention (integer pixel coordinates, intrinsics
  scaled to the scale-0 grid); the disparity of a candidate pair is the image distance between the
  projections of adjacent candidates. Pairs with a candidate behind (z <= 1e-3) the neighbour
  camera are left out; pairs projecting outside the neighbour image are kept (the disparity is a
  property of the geometry). For a camera translated by B parallel to its image plane this equals
  eq. 7, f B (i_max - i_min) / (D - 1), at every pixel (tested).
* "Multi-view depth" is the scale-0 depth sum_k p_k d_k (D.3: the head whose constant one-hot makes
  "its depth a constant 36-48% off the final depth"), compared at full resolution after the same x4
  upsampling (inverse depth, bilinear, align_corners) that makes the coarse-depth set G(D~) of eq. 6.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.metrics.diagnostics import mass_width, normalized_entropy
from locojax.models.locosplat.depth.mv_transformer import nearest_views
from locojax.models.locosplat.network import upsample_coarse_depth

Z_MIN = 1e-3  # the cost volume's clamp_min_depth: candidates nearer than this to a neighbour are left out


def _order_key(x):
    """float32 -> uint32 with the same order (IEEE bits: negative floats' magnitude bits flipped, then
    the sign bit flipped so that unsigned comparison orders all floats)."""
    i = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
    i = jnp.where(i < 0, i ^ jnp.int32(0x7FFFFFFF), i)
    return jax.lax.bitcast_convert_type(i, jnp.uint32) ^ jnp.uint32(0x80000000)


def _from_order_key(k):
    i = jax.lax.bitcast_convert_type(k ^ jnp.uint32(0x80000000), jnp.int32)
    i = jnp.where(i < 0, i ^ jnp.int32(0x7FFFFFFF), i)
    return jax.lax.bitcast_convert_type(i, jnp.float32)


def _kth_smallest(keys, mask, k):
    """keys [B, P] uint32, mask [B, P], k [B] (0-based) -> [B] uint32: the k-th smallest masked key, by
    bisection on the key (32 counting passes: exact, and far cheaper than sorting millions of entries
    on a CPU)."""
    def body(_, lohi):
        lo, hi = lohi
        mid = lo + (hi - lo) // 2
        enough = jnp.sum(mask & (keys <= mid[:, None]), axis=-1) > k
        return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

    b = keys.shape[0]
    lo = jnp.zeros((b,), jnp.uint32)
    hi = jnp.full((b,), 0xFFFFFFFF, jnp.uint32)
    return jax.lax.fori_loop(0, 32, body, (lo, hi))[0]


def masked_median(x, mask):
    """x, mask [B, P] -> [B]: median of x over mask (numpy's: the mean of the two middle values for an
    even count); NaN where a scene has no valid entry. Exact: the two middle order statistics are
    found by bisection on the floats' bit patterns."""
    keys = _order_key(x)
    n = jnp.sum(mask, axis=-1)
    lo = _from_order_key(_kth_smallest(keys, mask, jnp.maximum(n - 1, 0) // 2))
    hi = _from_order_key(_kth_smallest(keys, mask, n // 2))
    return jnp.where(n > 0, 0.5 * (lo + hi), jnp.nan)


def modal_share(argmax, num_bins: int):
    """argmax [B, P] int -> [B]: share of entries equal to the scene's most frequent value."""
    counts = jnp.sum(jax.nn.one_hot(argmax, num_bins, dtype=jnp.int32), axis=1)  # [B, D]
    return jnp.max(counts, axis=-1).astype(jnp.float32) / argmax.shape[-1]


def candidate_disparity(intrinsics, c2w, near, far, feature_hw, num_candidates: int, neighbours):
    """Disparity between adjacent plane-sweep candidates, in scale-0 feature pixels.

    intrinsics [B, V, 3, 3] normalised by image width / height; c2w [B, V, 4, 4] OpenCV; near, far
    [B, V]; feature_hw (h, w) of the scale-0 grid; neighbours [B, V, M] int (the cost volume's).
    Returns (disparity [B, V, M, D - 1, h * w], valid [same] bool).
    """
    h, w = feature_hw
    d = num_candidates
    f32 = jnp.float32
    hp = jax.lax.Precision.HIGHEST
    k = intrinsics.astype(f32) * jnp.array([w, h, 1.0], f32)[:, None]  # rows 0, 1 in feature pixels
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=f32), jnp.arange(w, dtype=f32), indexing="ij")
    pix = jnp.stack([xs, ys, jnp.ones_like(xs)], 0).reshape(3, h * w)
    rays = jnp.einsum("bvij,jp->bvip", jnp.linalg.inv(k), pix, precision=hp)  # [B, V, 3, hw], z = 1
    inv_lo, inv_hi = 1.0 / far.astype(f32), 1.0 / near.astype(f32)
    lin = jnp.linspace(0.0, 1.0, d, dtype=f32)
    inv = inv_lo[..., None] + lin * (inv_hi - inv_lo)[..., None]  # [B, V, D] candidates, inverse depth
    c2w = c2w.astype(f32)
    nbr_c2w = jax.vmap(lambda a, i: a[i])(c2w, neighbours)  # [B, V, M, 4, 4]
    pose = jnp.einsum("bvmij,bvjl->bvmil", jnp.linalg.inv(nbr_c2w), c2w, precision=hp)  # ref -> nbr cam
    # K (R ray / i + t) = (K R ray + i K t) / i: the projection's homogeneous coordinates, divided by the
    # candidate depth 1 / i, are linear in i (the view's K for its neighbours too, as the cost volume).
    a = jnp.einsum("bvij,bvmjk,bvkp->bvmip", k, pose[..., :3, :3], rays, precision=hp)  # [B, V, M, 3, hw]
    c = jnp.einsum("bvij,bvmj->bvmi", k, pose[..., :3, 3], precision=hp)  # [B, V, M, 3]
    hom = a[:, :, :, :, None, :] + inv[:, :, None, None, :, None] * c[..., None, None]  # [B, V, M, 3, D, hw]
    z_over_depth = hom[:, :, :, 2]  # z / depth: z > Z_MIN  <=>  z_over_depth > Z_MIN * i
    front = z_over_depth > Z_MIN * inv[:, :, None, :, None]
    uv = hom[:, :, :, :2] / jnp.where(front, z_over_depth, 1.0)[:, :, :, None]  # [B, V, M, 2, D, hw]
    disp = jnp.linalg.norm(uv[:, :, :, :, 1:] - uv[:, :, :, :, :-1], axis=3)  # [B, V, M, D - 1, hw]
    valid = front[:, :, :, 1:] & front[:, :, :, :-1]
    return disp, valid


def table13_diagnostics(match_prob0, coarse_depth, final_depth, intrinsics, c2w, near, far,
                        num_neighbours: int) -> dict:
    """match_prob0 [B, V, h, w, D] scale-0 matching distribution; coarse_depth [B, V, h, w] its depth
    sum_k p_k d_k; final_depth [B, V, H, W]; cameras and near / far [B, V] as the depth branch got them
    -> {name: [B] float32} (module docstring)."""
    b, v, h, w, d = match_prob0.shape
    p = jax.lax.stop_gradient(match_prob0.astype(jnp.float32)).reshape(b, -1, d)
    ones = jnp.ones(p.shape[:2], bool)
    out = {
        "scale0_entropy": masked_median(normalized_entropy(p), ones),
        "scale0_w90": masked_median(mass_width(p).astype(jnp.float32), ones),
        "scale0_modal_share": modal_share(jnp.argmax(p, axis=-1), d),
    }
    disp, valid = candidate_disparity(intrinsics, c2w, near, far, (h, w), d, nearest_views(c2w, num_neighbours))
    out["delta_u_px"] = masked_median(disp.reshape(b, -1), valid.reshape(b, -1))
    final = jax.lax.stop_gradient(final_depth.astype(jnp.float32))
    mv = upsample_coarse_depth(jax.lax.stop_gradient(coarse_depth), final.shape[-2:])
    ok = jnp.isfinite(final) & (final > 0)
    rel = jnp.abs(mv - final) / jnp.where(ok, final, 1.0)
    out["mv_depth_rel_err"] = masked_median(rel.reshape(b, -1), ok.reshape(b, -1))
    return out
