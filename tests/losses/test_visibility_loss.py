"""TokenGS/LocusGS visibility regularisation (the LocusGS paper eqs. 27-28) against a hand-written numpy projection."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax import losses

W, H = 64, 48


def _views():
    """Two cameras looking down +z from x = 0 and x = 4 (OpenCV), normalized intrinsics."""
    c2w = np.tile(np.eye(4, dtype=np.float32), (2, 1, 1))
    c2w[1, 0, 3] = 4.0
    k_pix = np.array([[50.0, 0, 32.0], [0, 40.0, 24.0], [0, 0, 1]], np.float32)
    k_norm = k_pix / np.array([[W], [H], [1.0]], np.float32)
    return jnp.asarray(c2w), jnp.asarray(np.stack([k_norm, k_norm])), k_pix


def _numpy_phi(points, c2w, k_pix):
    """TokenGS: pixel projection, uv / [W, H] * 2 - 1, relu(|.| - 1) summed over u, v."""
    out = []
    for m in c2w:
        w2c = np.linalg.inv(m)
        cam = points @ w2c[:3, :3].T + w2c[:3, 3]
        uv = (cam @ k_pix.T)[:, :2] / cam[:, 2:3]
        uvn = uv / np.array([W, H]) * 2 - 1
        out.append(np.maximum(np.abs(uvn) - 1, 0).sum(-1))
    return np.stack(out)  # [V, N]


def test_zero_inside_any_view_positive_outside_all():
    c2w, k, k_pix = _views()
    inside_first_only = [0.0, 0.0, 2.0]  # centre of view 0; far left of view 1 (u~ = -2.125)
    inside_second_only = [4.0, 0.5, 3.0]
    outside_both = [10.0, 0.0, 2.0]  # right of both
    pts = np.array([inside_first_only, inside_second_only, outside_both], np.float32)
    phi = np.asarray(losses.out_of_view_penalty(jnp.asarray(pts), c2w, k))
    np.testing.assert_allclose(phi, _numpy_phi(pts, np.asarray(c2w), k_pix), rtol=1e-5)
    assert phi[1, 0] > 0 and phi[0, 1] > 0  # each is outside the other view
    loss_in = losses.visibility_loss(jnp.asarray(pts[:2]), c2w, k)
    assert float(loss_in) == 0.0  # inside at least one view: no penalty
    expected = np.minimum(_numpy_phi(pts, np.asarray(c2w), k_pix).min(0), 1.0).mean()
    np.testing.assert_allclose(float(losses.visibility_loss(jnp.asarray(pts), c2w, k)), expected, rtol=1e-5)


def test_gradient_pulls_outside_points_in_and_ignores_inside_ones():
    c2w, k, _ = _views()
    pts = jnp.array([[0.0, 0.0, 2.0], [5.9, 0.0, 2.0]])  # second: just right of view 1 (u~ ~ 1.18)
    loss = lambda p: losses.visibility_loss(p, c2w, k)
    g = np.asarray(jax.grad(loss)(pts))
    np.testing.assert_array_equal(g[0], 0.0)
    assert g[1, 0] > 0  # descent moves x left, back into the image
    stepped = pts - 0.1 * g
    assert float(loss(stepped)) < float(loss(pts))


def test_behind_camera_clamp_and_nonfinite_points():
    c2w, k, _ = _views()
    behind = jnp.array([[0.0, 0.0, -2.0], [4.0, 0.0, -1.0]])  # behind both cameras
    far_out = jnp.array([[1e4, 0.0, 1.0]])
    np.testing.assert_allclose(float(losses.visibility_loss(behind, c2w, k, max_penalty=0.7)), 0.7)
    np.testing.assert_allclose(float(losses.visibility_loss(far_out, c2w, k)), 1.0)  # clamped at max_penalty
    bad = jnp.array([[jnp.nan, 0.0, 2.0], [0.0, 0.0, 2.0]])
    val, g = jax.value_and_grad(lambda p: losses.visibility_loss(p, c2w, k))(bad)
    np.testing.assert_allclose(float(val), 0.5)  # NaN point counts as invisible, the other as visible
    assert np.all(np.isfinite(np.asarray(g)))
    with pytest.raises(ValueError, match="max_penalty"):
        losses.visibility_loss(behind, c2w, k, max_penalty=0.0)


def test_batching_over_scenes():
    c2w, k, _ = _views()
    rng = np.random.default_rng(0)
    points = jnp.asarray(rng.uniform(-8, 8, (3, 5, 3)).astype(np.float32)).at[..., 2].add(10.0)  # [B, N, 3], in front
    cams = jnp.broadcast_to(c2w, (3,) + c2w.shape)
    ks = jnp.broadcast_to(k, (3,) + k.shape)
    batched = losses.visibility_loss(points, cams, ks)
    assert batched.shape == (3,)
    per_scene = jax.vmap(lambda p: losses.visibility_loss(p, c2w, k))(points)
    np.testing.assert_allclose(np.asarray(per_scene), np.asarray(batched), rtol=1e-6)
    expected = [np.minimum(_numpy_phi(np.asarray(p), np.asarray(c2w), _views()[2]).min(0), 1.0).mean()
                for p in np.asarray(points)]
    np.testing.assert_allclose(np.asarray(batched), expected, rtol=1e-5)


def test_kept_visibility_loss_penalises_only_what_the_rasteriser_keeps():
    """The released TokenGS L_vis (gsplat means2d; culled Gaussians have means2d 0 -> no penalty): a
    centre just outside the image whose footprint still touches it costs relu(|u~| - 1); one far outside,
    one beyond the far plane and one inside cost nothing."""
    import jax.numpy as jnp
    from locojax.losses.visibility import kept_visibility_loss
    from locojax.types import Gaussians

    W = H = 32
    K = jnp.asarray([[[[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]]]], jnp.float32)  # fx = 32 px
    c2w = jnp.eye(4)[None, None]

    def loss(x, z, scale):
        g = Gaussians(means=jnp.asarray([[[x, 0.0, z]]], jnp.float32), quats=jnp.asarray([[[1.0, 0, 0, 0]]]),
                      scales=jnp.full((1, 1, 3), scale, jnp.float32), opacities=jnp.ones((1, 1)),
                      sh=jnp.zeros((1, 1, 1, 3)))
        return float(kept_visibility_loss(g, c2w, K, width=W, height=H, near=0.025, far=125.0)[0])

    # x / z = 0.6: u = 32 * 0.6 + 16 = 35.2 px, u~ = 1.2; footprint 3 * 0.2 * 32 = 19 px reaches the image
    assert loss(0.6, 1.0, 0.2) == pytest.approx(0.2, abs=1e-5)
    assert loss(0.6, 1.0, 0.01) == 0.0       # same centre, footprint misses the image: culled
    assert loss(3.0, 1.0, 0.2) == 0.0        # far outside: culled
    assert loss(0.0, 200.0, 5.0) == 0.0      # beyond the far plane
    assert loss(0.1, 1.0, 0.2) == 0.0        # inside
