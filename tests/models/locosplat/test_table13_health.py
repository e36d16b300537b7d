"""Table 13's depth-branch health diagnostics (health.py) against direct numpy computations on small
hand-made inputs: a one-hot volume reads entropy 0, w90 1, modal share 1; random volumes equal numpy
loops; Delta u equals eq. 7 for a sideways baseline and a numpy projection loop for a general pose;
the MV-vs-final depth error equals numpy's median."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.models.locosplat import health
from locojax.models.locosplat.depth.mv_transformer import nearest_views

B, V, H, W, D = 2, 3, 4, 4, 8
K_NORM = np.array([[0.9, 0, 0.5], [0, 0.8, 0.5], [0, 0, 1]], np.float32)


def _cameras(rotate: bool, seed=0):
    rng = np.random.default_rng(seed)
    c2w = np.tile(np.eye(4, dtype=np.float32), (B, V, 1, 1))
    c2w[..., 0, 3] = np.arange(V) * 0.2 + np.arange(B)[:, None] * 0.05  # sideways baselines
    if rotate:
        for b in range(B):
            for v in range(V):
                a = rng.normal(size=3) * 0.1
                kx = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
                rot = np.eye(3) + np.sin(1) * kx + (1 - np.cos(1)) * kx @ kx  # Rodrigues, small angle
                u, _, vt = np.linalg.svd(rot)
                c2w[b, v, :3, :3] = u @ vt
                c2w[b, v, :3, 3] += rng.normal(size=3) * 0.05
    intr = np.broadcast_to(K_NORM, (B, V, 3, 3)).astype(np.float32)
    near = np.full((B, V), 0.5, np.float32)
    far = np.full((B, V), 100.0, np.float32)
    return intr, c2w, near, far


def _numpy_w90(p):
    a = int(np.argmax(p))
    for r in range(len(p)):
        lo, hi = max(a - r, 0), min(a + r, len(p) - 1)
        if p[lo: hi + 1].sum() >= 0.9 - 1e-6:
            return hi - lo + 1


def _diags(prob, coarse, final, cams):
    fn = jax.jit(lambda *a: health.table13_diagnostics(*a, num_neighbours=2))
    return {k: np.asarray(v) for k, v in fn(prob, coarse, final, *cams).items()}


def test_one_hot_volume_reads_collapsed_and_random_volumes_equal_numpy():
    cams = _cameras(False)
    coarse = np.full((B, V, H, W), 2.0, np.float32)
    final = np.full((B, V, 4 * H, 4 * W), 2.0, np.float32)
    one_hot = np.zeros((B, V, H, W, D), np.float32)
    one_hot[..., 5] = 1.0
    out = _diags(one_hot, coarse, final, cams)
    assert set(out) == {"scale0_entropy", "scale0_w90", "scale0_modal_share", "delta_u_px", "mv_depth_rel_err"}
    assert all(v.shape == (B,) for v in out.values())
    np.testing.assert_allclose(out["scale0_entropy"], 0.0, atol=1e-6)
    np.testing.assert_array_equal(out["scale0_w90"], 1.0)
    np.testing.assert_array_equal(out["scale0_modal_share"], 1.0)
    np.testing.assert_allclose(out["mv_depth_rel_err"], 0.0, atol=1e-6)

    rng = np.random.default_rng(1)
    logits = rng.normal(size=(B, V, H, W, D)) * 2.0
    logits[0, ..., 3] += 2.5  # scene 0 mostly peaks at bin 3
    prob = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    final = rng.uniform(1.0, 5.0, (B, V, 4 * H, 4 * W)).astype(np.float32)
    out = _diags(prob, coarse, final, cams)
    for b in range(B):
        p = prob[b].reshape(-1, D).astype(np.float64)
        ent = -(p * np.log(p)).sum(-1) / np.log(D)
        w90 = [_numpy_w90(row) for row in p]
        counts = np.bincount(p.argmax(-1), minlength=D)
        np.testing.assert_allclose(out["scale0_entropy"][b], np.median(ent), rtol=1e-5)
        assert out["scale0_w90"][b] == np.median(w90)
        assert out["scale0_modal_share"][b] == pytest.approx(counts.max() / len(p))
        # coarse depth constant 2: its x4 upsample is 2 everywhere
        np.testing.assert_allclose(out["mv_depth_rel_err"][b], np.median(np.abs(2.0 - final[b]) / final[b]),
                                   rtol=1e-5)
    assert out["scale0_modal_share"][0] > out["scale0_modal_share"][1]


def test_masked_median_is_numpys():
    rng = np.random.default_rng(2)
    x = (rng.normal(size=(4, 11)) * 10.0 ** rng.integers(-3, 4, (4, 11))).astype(np.float32)
    x[0, :6] = [-0.0, 0.0, np.inf, -np.inf, 1e-40, -1e-40]  # the bisection orders IEEE bit patterns
    x[3, :3] = 5.0  # ties
    mask = rng.uniform(size=(4, 11)) > 0.4
    mask[0, :6] = True
    mask[1] = False
    mask[2, :4] = True  # an even count somewhere
    got = np.asarray(health.masked_median(jnp.asarray(x), jnp.asarray(mask)))
    for i in range(4):
        if mask[i].any():
            np.testing.assert_allclose(got[i], np.median(x[i][mask[i]]), rtol=1e-6)
        else:
            assert np.isnan(got[i])


def test_delta_u_equals_eq7_for_a_sideways_baseline():
    """Cameras translated along x, no rotation: every adjacent-candidate disparity is f B Delta i."""
    intr, c2w, near, far = _cameras(False)
    nbr = nearest_views(jnp.asarray(c2w), 2)
    disp, valid = health.candidate_disparity(intr, c2w, near, far, (H, W), D, nbr)
    assert bool(jnp.all(valid))
    f_px = K_NORM[0, 0] * W
    centres = c2w[..., 0, 3]
    nb = np.asarray(nbr)
    baseline = np.abs(centres[:, :, None] - np.take_along_axis(centres[:, None, :].repeat(V, 1), nb, 2))
    eq7 = f_px * baseline * (1 / 0.5 - 1 / 100.0) / (D - 1)  # [B, V, M]
    np.testing.assert_allclose(np.asarray(disp), np.broadcast_to(eq7[..., None, None], disp.shape), rtol=1e-4)


def test_delta_u_equals_a_numpy_projection_loop_for_general_poses():
    intr, c2w, near, far = _cameras(True, seed=3)
    prob = np.full((B, V, H, W, D), 1.0 / D, np.float32)
    out = _diags(prob, np.full((B, V, H, W), 2.0, np.float32), np.full((B, V, 4 * H, 4 * W), 2.0, np.float32),
                 (intr, c2w, near, far))
    nb = np.asarray(nearest_views(jnp.asarray(c2w), 2))
    k = K_NORM.astype(np.float64) * np.array([[W], [H], [1.0]])
    inv = 1 / 100.0 + np.linspace(0, 1, D) * (1 / 0.5 - 1 / 100.0)
    for b in range(B):
        vals = []
        for v in range(V):
            for m in nb[b, v]:
                w2c = np.linalg.inv(c2w[b, m].astype(np.float64))
                for y in range(H):
                    for x in range(W):
                        ray = np.linalg.solve(k, [x, y, 1.0])
                        uv = []
                        for i in inv:
                            pw = c2w[b, v, :3, :3] @ (ray / i) + c2w[b, v, :3, 3]
                            pc = w2c[:3, :3] @ pw + w2c[:3, 3]
                            q = k @ pc
                            uv.append((q[:2] / q[2], q[2] > health.Z_MIN))
                        for (u0, ok0), (u1, ok1) in zip(uv[:-1], uv[1:]):
                            if ok0 and ok1:
                                vals.append(np.linalg.norm(u1 - u0))
        np.testing.assert_allclose(out["delta_u_px"][b], np.median(vals), rtol=1e-3)
