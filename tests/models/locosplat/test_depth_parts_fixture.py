"""Parts of the depth branch against the official DepthSplat fixture (tests/fixtures/
depthsplat_depth_branch, made by running cvg/depthsplat's MultiViewUniMatch on CPU)."""

import os

import jax
import numpy as np
import pytest

from locojax.models.locosplat.convert import convert_depth_branch as import_weights
from locojax.models.locosplat.depth.cnn import CNNEncoder
from locojax.models.locosplat.depth.mv_transformer import MultiViewTransformer, nearest_views
from locojax.models.locosplat.depth.cost_volume import plane_sweep_cost_volume

# made by the official PyTorch code (see its README)
FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "depthsplat_depth_branch")
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def _load():
    sd = {k: np.asarray(v, np.float32) for k, v in np.load(os.path.join(FIX, "depthsplat_tiny_weights.npz")).items()}
    return sd, np.load(os.path.join(FIX, "depthsplat_tiny_io.npz"))


def _close(got, ref, tol=1e-4):
    got = np.asarray(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-12)
    assert err < tol, err


def _unimatch_params(sd):
    sub = {k: v for k, v in sd.items() if k.startswith(("depth_predictor.backbone.", "depth_predictor.transformer."))}
    params, ignored = import_weights(sub, None, "unimatch")
    assert not ignored
    return params


def test_cnn_matches_official():
    sd, io = _load()
    imgs = io["images"][0].transpose(0, 2, 3, 1)
    x = (imgs - MEAN) / STD
    outs = jax.jit(CNNEncoder(128).apply)({"params": _unimatch_params(sd)["cnn"]}, x.astype(np.float32))
    for i, o in enumerate(outs[::-1]):  # fixture: features_cnn_0 is 1/4 (low to high)
        _close(o, io[f"features_cnn_{i}"].transpose(0, 2, 3, 1))


def test_cost_volume_matches_official():
    _, io = _load()
    feats = io["features_mv_0"].transpose(0, 2, 3, 1)  # [V, h, w, C]
    v, h, w, _ = feats.shape
    nn_idx = io["nn_matrix"][0][:, 1:]  # each view's 2 nearest cameras (column 0 is itself)
    k = io["intrinsics"][0].copy()
    k[:, 0] *= 96 / 4
    k[:, 1] *= 64 / 4
    c2w = io["c2w"][0]
    near, far = io["near"][0], io["far"][0]
    lin = np.linspace(0, 1, 64, dtype=np.float32)
    inv = (1 / far)[:, None] + lin[None] * (1 / near - 1 / far)[:, None]
    inv = np.broadcast_to(inv[:, :, None, None], (v, 64, h, w))
    cv = jax.jit(plane_sweep_cost_volume)(feats, feats[nn_idx], k, c2w, c2w[nn_idx], inv)
    _close(cv, io["cost_volume"].transpose(0, 2, 3, 1), 1e-4)


def test_nearest_views_match_official_nn_matrix():
    _, io = _load()
    got = np.asarray(nearest_views(io["c2w"], 2))
    np.testing.assert_array_equal(got, io["nn_matrix"][:, :, 1:])


def test_mv_transformer_matches_official():
    sd, io = _load()
    x = io["features_cnn_0"].transpose(0, 2, 3, 1)[None]  # [1, V, h, w, C]
    nbr = io["nn_matrix"][:, :, 1:]
    out = jax.jit(MultiViewTransformer(128, 6, 2).apply)({"params": _unimatch_params(sd)["transformer"]}, x, nbr)
    _close(out[0], io["features_mv_0"].transpose(0, 2, 3, 1), 1e-4)


def test_dpt_feature_head_matches_official():
    from locojax.models.locosplat.depth.dpt import DPTHead
    sd, io = _load()
    from locojax.models.locosplat.convert import torch_module_tree
    p = torch_module_tree(sd, "feature_upsampler.", set())
    nhwc = lambda a: a.transpose(0, 2, 3, 1)  # noqa: E731
    taps = [nhwc(io[f"features_mono_intermediate_{i}"]) for i in range(4)]
    cnn = [nhwc(io[f"features_cnn_{i}"]) for i in (2, 1, 0)]
    head = DPTHead(16, (8, 16, 32, 64), 4, 1, True)
    out = jax.jit(head.apply)({"params": p}, taps, cnn, nhwc(io["features_mv_0"]))
    _close(out, nhwc(io["upsampled_features"]), 1e-4)


def test_regressor_matches_official():
    from locojax.models.locosplat.depth.unet import Regressor
    sd, io = _load()
    params, _ = import_weights({k: v for k, v in sd.items() if k.startswith(("depth_predictor.regressor",
                                "depth_predictor.depth_head", "depth_predictor.backbone"))}, None, "depthsplat")
    nhwc = lambda a: a.transpose(0, 2, 3, 1)  # noqa: E731
    x = np.concatenate([nhwc(io[k]) for k in ("cost_volume", "features_cnn_0", "features_mv_0", "features_mono_0")], -1)
    reg = Regressor(32, 64, (1, 1, 1), (4,), num_views=4)
    prob = jax.jit(reg.apply)({"params": params["regressor0"]}, x)
    _close(prob, nhwc(io["match_prob"]), 1e-4)
