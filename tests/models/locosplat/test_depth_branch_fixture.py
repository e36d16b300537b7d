"""The whole DepthBranch reproduces the official DepthSplat depth branch (single-scale fixture,
tests/fixtures/depthsplat_depth_branch) with weights converted by `import_weights(kind="depthsplat")`."""

import os

import jax
import numpy as np
import pytest

from locojax.models.locosplat.convert import convert_depth_branch as import_weights
from locojax.models.locosplat.depth import DepthBranch, DepthBranchConfig

# made by the official PyTorch code (see its README)
FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "depthsplat_depth_branch")

# The fixture's MultiViewUniMatch(num_scales=1, upsample_factor=4, D=64, vit 'tiny', unet 32) and
# DPTHead(features=16, out_channels=[8, 16, 32, 64]) feature upsampler (its README).
FIXTURE_CFG = DepthBranchConfig(
    num_candidates=64, num_scales=1, trunk="tiny", trunk_trainable=True, mono_proj_dim=0,
    unet_channels=32, depthwise_separable="none", upsampler_features=16, upsampler_out_channels=(8, 16, 32, 64),
    feature_head_features=16, feature_head_out_channels=(8, 16, 32, 64))


def _close(got, ref, tol):
    got = np.asarray(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-12)
    assert err < tol, err


def test_depth_branch_matches_official_single_scale():
    sd = dict(np.load(os.path.join(FIX, "depthsplat_tiny_weights.npz")))
    io = np.load(os.path.join(FIX, "depthsplat_tiny_io.npz"))
    params, ignored = import_weights(sd, FIXTURE_CFG, "depthsplat")
    imgs = io["images"].transpose(0, 1, 3, 4, 2)
    out = jax.jit(lambda p, *a: DepthBranch(FIXTURE_CFG).apply({"params": p}, *a, train=False))(
        params, imgs, io["intrinsics"], io["c2w"], io["near"], io["far"])
    _close(out.match_prob0[0], io["match_prob"].transpose(0, 2, 3, 1), 1e-4)
    _close(out.depth, io["depth"], 1e-4)
    _close(out.dpt_features[0], io["upsampled_features"].transpose(0, 2, 3, 1), 1e-4)
    # coarse depth = 1 / sum_k p_k d_k at 1/4; peak = max_k p_k nearest-upsampled x4.
    peak = io["match_prob"].max(1)[:, :, None, :, None].repeat(4, 1).repeat(4, 3).reshape(4, 64, 96)
    _close(out.peak_prob[0, ..., 0], peak, 1e-4)
    assert out.coarse_depth.shape == (1, 4, 16, 24)
