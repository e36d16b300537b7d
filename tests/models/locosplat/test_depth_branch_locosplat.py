"""LoCoSplat's own depth-branch settings (two scales, ViT-tap projections, depthwise-separable
half-width regressor) at tiny size: static shapes, one compilation, gradients, the frozen trunk,
and the clear stop for a full trunk without weights."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.models.locosplat.convert import DEPTH_MODULE_NAME, import_weights
from locojax.models.locosplat.depth import DepthBranch, DepthBranchConfig
from locojax.models.locosplat.depth.config import MissingTrunkWeights, require_trunk_weights

TINY = DepthBranchConfig(num_candidates=16, trunk="tiny", mono_proj_dim=32, transformer_layers=2,
                         unet_channels=32, upsampler_features=16, upsampler_out_channels=(8, 16, 32, 32),
                         feature_head_features=16, feature_head_out_channels=(8, 16, 32, 32))


def _inputs(b=1, v=3, h=32, w=32, seed=0):
    rng = np.random.default_rng(seed)
    k = np.broadcast_to(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (b, v, 3, 3))
    c2w = np.broadcast_to(np.eye(4, dtype=np.float32), (b, v, 4, 4)).copy()
    c2w[..., 0, 3] = np.arange(v) * 0.1
    return (rng.uniform(0, 1, (b, v, h, w, 3)).astype(np.float32), k, c2w,
            np.full((b, v), 0.5, np.float32), np.full((b, v), 100.0, np.float32))


def test_shapes_grads_and_frozen_trunk():
    model = DepthBranch(TINY)
    args = _inputs()
    params = jax.jit(lambda: model.init(jax.random.PRNGKey(0), *args, train=True))()["params"]
    names = jax.tree_util.tree_leaves_with_path(params["regressor0"])
    keys = [jax.tree_util.keystr(p) for p, _ in names]
    assert any("in_layers_2_dw" in k for k in keys) and not any("regressor_0_dw" in k for k in keys)  # "unet"

    def loss(p, imgs):
        out = model.apply({"params": p}, imgs, *args[1:], train=True)
        return jnp.mean(out.depth) + jnp.mean(out.coarse_depth) + jnp.mean(out.dpt_features ** 2)

    step = jax.jit(jax.value_and_grad(loss))
    val, g = step(params, args[0])
    out = jax.jit(lambda p, *a: model.apply({"params": p}, *a, train=False))(params, *args)
    assert out.depth.shape == (1, 3, 32, 32) and out.coarse_depth.shape == (1, 3, 8, 8)
    assert out.dpt_features.shape == (1, 3, 32, 32, 16) and out.peak_prob.shape == (1, 3, 32, 32, 1)
    assert out.match_prob0.shape == (1, 3, 8, 8, 16)
    np.testing.assert_allclose(np.asarray(out.match_prob0).sum(-1), 1.0, atol=1e-5)
    assert np.all((np.asarray(out.depth) >= 0.5 - 1e-4) & (np.asarray(out.depth) <= 100.0 + 1e-2))
    assert np.isfinite(float(val))
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree_util.tree_leaves(g["trunk"]))  # frozen
    assert any(np.any(np.asarray(x) != 0) for x in jax.tree_util.tree_leaves(g["mono_proj_0"]))
    assert any(np.any(np.asarray(x) != 0) for x in jax.tree_util.tree_leaves(g["regressor1"]))
    # Same shapes, different scene content: no recompilation.
    step(params, _inputs(seed=1)[0])
    assert step._cache_size() == 1


def test_full_trunk_without_weights_stops_with_the_import_command():
    with pytest.raises(MissingTrunkWeights, match="python -m experiments.import_weights"):
        require_trunk_weights(DepthBranchConfig(trunk="vitb"))
    require_trunk_weights(DepthBranchConfig(trunk="vitb", trunk_trainable=True))
    require_trunk_weights(dataclasses.replace(TINY, trunk_trainable=False))


def test_import_hook_nests_under_the_model_name_and_rejects_strays():
    sd = {"pretrained.cls_token": np.zeros((1, 1, 64), np.float32), "something.else": np.zeros(3)}
    with pytest.raises(ValueError, match="something.else"):
        import_weights(sd, TINY, "depth_anything_v2")
    out = import_weights({"pretrained.cls_token": np.zeros((1, 1, 64), np.float32)}, TINY, "depth_anything_v2")
    assert list(out) == [DEPTH_MODULE_NAME] and "trunk" in out[DEPTH_MODULE_NAME]


def test_bfloat16_image_side_keeps_float32_outputs():
    """Output dtypes via eval_shape (no compile: bf16 convs are slow to compile on CPU); the bf16
    trunk itself runs and stays close to float32."""
    from locojax.models.locosplat.depth.config import TRUNKS
    from locojax.models.locosplat.depth.dinov2 import DinoV2
    cfg = dataclasses.replace(TINY, image_dtype="bfloat16")
    args = _inputs()
    model = DepthBranch(cfg)
    shapes = jax.eval_shape(lambda: model.apply(model.init(jax.random.PRNGKey(0), *args, train=False),
                                                *args, train=False))
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(shapes))
    dim, heads, _, _ = TRUNKS["tiny"]
    x = np.random.default_rng(0).normal(size=(1, 28, 28, 3)).astype(np.float32)
    p = DinoV2(dim, heads, 3, (2,)).init(jax.random.PRNGKey(0), x)
    f32 = DinoV2(dim, heads, 3, (2,)).apply(p, x)[0][0]
    bf16 = DinoV2(dim, heads, 3, (2,), jnp.bfloat16).apply(p, x)[0][0]
    err = np.abs(np.asarray(bf16, np.float32) - np.asarray(f32)).max() / np.abs(np.asarray(f32)).max()
    assert 0 < err < 0.05
