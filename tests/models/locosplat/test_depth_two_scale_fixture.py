"""DepthBranch with two scales (1/4 global D candidates, 1/2 local D/4 candidates, DPT to full
resolution) reproduces the official DepthSplat code run with num_scales=2, upsample_factor=2
(tests/fixtures/locosplat/depthsplat_two_scale.npz; tests/fixtures/locosplat/README.md)."""

import os

import jax
import numpy as np

from locojax.models.locosplat.convert import convert_depth_branch as import_weights
from locojax.models.locosplat.depth import DepthBranch, DepthBranchConfig

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "locosplat", "depthsplat_two_scale.npz")

CFG = DepthBranchConfig(
    num_candidates=32, num_scales=2, trunk="tiny", trunk_trainable=True, mono_proj_dim=0,
    transformer_layers=2, ffn_expansion=1, unet_channels=64, depthwise_separable="none",
    upsampler_features=16, upsampler_out_channels=(8, 16, 32, 64),
    feature_head_features=16, feature_head_out_channels=(8, 16, 32, 64))


def _close(got, ref, tol):
    got = np.asarray(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-12)
    assert err < tol, err


def test_depth_branch_matches_official_two_scale():
    io = np.load(FIX)
    sd = {k[2:]: io[k].astype(np.float32) * io["s:" + k[2:]] for k in io.files if k.startswith("w:")}
    params, _ = import_weights(sd, CFG, "depthsplat")
    imgs = io["images"].astype(np.float32).transpose(0, 1, 3, 4, 2)
    out = jax.jit(lambda p, *a: DepthBranch(CFG).apply({"params": p}, *a, train=False))(
        params, imgs, io["intrinsics"], io["c2w"], io["near"], io["far"])
    p0 = io["match_prob_0"].transpose(0, 2, 3, 1)
    _close(out.match_prob0[0], p0, 1e-4)
    _close(out.depth, io["depth"], 1e-4)
    _close(out.dpt_features[0, :, ::4, ::4], io["features_sub"].transpose(0, 2, 3, 1), 1e-4)
    # scale-0 depth: 1 / sum_k p_k d_k with d_k linear in inverse depth over [1/far, 1/near].
    near, far = io["near"][0, 0], io["far"][0, 0]
    cand = 1 / far + np.linspace(0, 1, 32) * (1 / near - 1 / far)
    _close(out.coarse_depth[0], 1 / (p0 * cand).sum(-1), 1e-4)
    # peak matching probability of the LAST scale (1/2 resolution), nearest-upsampled x2.
    peak = io["match_prob_1"].max(1).repeat(2, 1).repeat(2, 2)
    _close(out.peak_prob[0, ..., 0], peak, 1e-4)
