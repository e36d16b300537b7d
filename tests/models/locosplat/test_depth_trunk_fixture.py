"""The DINOv2 trunk reproduces DepthAnythingV2's official `get_intermediate_layers` (fixture
tests/fixtures/depth_anything_v2, made from the official PyTorch code), loaded through the same
converter as the released checkpoint; the converter accounts for every key of the ViT-B manifest."""

import json
import os

import jax
import numpy as np
import pytest

from locojax.models.locosplat.convert import convert_depth_branch as import_weights
from locojax.models.locosplat.depth.config import DepthBranchConfig, TRUNKS
from locojax.models.locosplat.depth.dinov2 import DinoV2

# made by the official PyTorch code (see its README)
FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "depth_anything_v2")


def test_dinov2_taps_match_official():
    sd = dict(np.load(os.path.join(FIX, "tiny_weights.npz")))
    io = np.load(os.path.join(FIX, "tiny_io.npz"))
    params, ignored = import_weights(sd, DepthBranchConfig(trunk="tiny"), "depth_anything_v2")
    assert "pretrained.mask_token" in ignored or "pretrained.mask_token" not in sd
    dim, heads, depth, taps = TRUNKS["tiny"]
    model = DinoV2(dim, heads, depth, taps)
    x = io["input"].transpose(0, 2, 3, 1)
    outs = jax.jit(model.apply)({"params": params["trunk"]}, x)
    for i, (patch, cls) in enumerate(outs):
        ref_p, ref_c = io[f"layer{i}_patch_tokens"], io[f"layer{i}_class_token"]
        scale = np.abs(ref_p).max()
        np.testing.assert_allclose(np.asarray(patch), ref_p, atol=2e-5 * scale, rtol=0)
        np.testing.assert_allclose(np.asarray(cls), ref_c, atol=2e-5 * np.abs(ref_c).max(), rtol=0)


def test_vitb_manifest_fully_accounted():
    """Every key of the released depth_anything_v2_vitb.pth maps or is explicitly ignored, and the
    mapped trunk has exactly the Flax parameter tree of DinoV2('vitb')."""
    manifest = json.load(open(os.path.join(FIX, "manifest_vitb.json")))
    sd = {k: np.zeros(v, np.float32) for k, v in manifest.items() if k.startswith("pretrained.")}
    sd.update({k: np.zeros((1,), np.float32) for k in manifest if not k.startswith("pretrained.")})
    params, ignored = import_weights(sd, DepthBranchConfig(trunk="vitb"), "depth_anything_v2")
    dim, heads, depth, taps = TRUNKS["vitb"]
    shapes = jax.eval_shape(lambda: DinoV2(dim, heads, depth, taps).init(
        jax.random.PRNGKey(0), np.zeros((1, 28, 28, 3), np.float32)))["params"]
    got = jax.tree_util.tree_map(lambda a: a.shape, params["trunk"])
    want = jax.tree_util.tree_map(lambda a: tuple(a.shape), shapes)
    assert got == want
    n = sum(int(np.prod(v)) for k, v in manifest.items() if k.startswith("pretrained.") and k != "pretrained.mask_token")
    assert n == sum(int(np.prod(s)) for s in jax.tree_util.tree_leaves(got, is_leaf=lambda s: isinstance(s, tuple)))
    assert all(k.startswith("depth_head.") or k == "pretrained.mask_token" for k in ignored)
