"""LocusGS C_centroid (eq. 12) and LoCoSplat depth-branch health (Table 13)."""

import jax.numpy as jnp
import numpy as np
import pytest

from locojax.metrics import diagnostics


def test_centroid_dispersion_against_loops():
    rng = np.random.default_rng(0)
    means = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    ref = []
    for b in range(2):
        total = 0.0
        for i in range(5):
            c = means[b, i].mean(0)
            total += sum(np.linalg.norm(means[b, i, k] - c) for k in range(4))
        ref.append(total / 20)
    np.testing.assert_allclose(np.asarray(diagnostics.centroid_dispersion(jnp.asarray(means))), ref, rtol=1e-5)
    tight = np.repeat(means[:, :, :1], 4, axis=2)  # all K Gaussians of a token at one point
    np.testing.assert_allclose(np.asarray(diagnostics.centroid_dispersion(jnp.asarray(tight))), 0.0, atol=1e-6)
    with pytest.raises(ValueError):
        diagnostics.centroid_dispersion(jnp.zeros((4, 2)))


def test_collapsed_and_uniform_heads():
    d = 64
    one_hot = jnp.zeros((10, d)).at[:, 17].set(1.0)
    s = diagnostics.depth_branch_stats(one_hot)
    summary = diagnostics.summarize_depth_branch(s, d)
    assert summary == {"entropy_median": 0.0, "w90_median": 1.0, "modal_bin": 17, "modal_bin_share": 1.0}
    uniform = jnp.full((3, d), 1.0 / d)
    np.testing.assert_allclose(np.asarray(diagnostics.normalized_entropy(uniform)), 1.0, rtol=1e-5)
    # argmax of a uniform row is bin 0; the window [0, r] needs ceil(0.9 * 64) = 58 bins
    np.testing.assert_array_equal(np.asarray(diagnostics.mass_width(uniform)), 58)


def test_w90_symmetric_window_and_pooled_summary():
    p = np.zeros((2, 9), np.float32)
    p[0, [3, 4, 5]] = [0.2, 0.6, 0.2]  # 90% needs the 3 bins around bin 4
    p[1, [0, 1, 2]] = [0.5, 0.3, 0.2]  # argmax at the border: window [0, 2] clipped -> 3 bins
    np.testing.assert_array_equal(np.asarray(diagnostics.mass_width(jnp.asarray(p))), [3, 3])
    p_ref = p[0][p[0] > 0]
    np.testing.assert_allclose(
        float(diagnostics.normalized_entropy(jnp.asarray(p))[0]), -(p_ref * np.log(p_ref)).sum() / np.log(9), rtol=1e-5
    )
    stats = [diagnostics.depth_branch_stats(jnp.asarray(p)), diagnostics.depth_branch_stats(jnp.asarray(p[:1]))]
    out = diagnostics.summarize_depth_branch(
        stats, 9, mv_depth=np.array([1.1, 2.0, 3.0]), final_depth=np.array([1.0, 2.0, 2.0])
    )
    assert out["modal_bin"] == 4 and out["modal_bin_share"] == pytest.approx(2 / 3)
    assert out["mv_depth_rel_err_median"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="both"):
        diagnostics.summarize_depth_branch(stats, 9, mv_depth=np.ones(3))
