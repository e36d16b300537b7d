"""Scanned repeated blocks (`locojax.models.common.scan_blocks`) vs the Python-unrolled loop: same
param tree, same outputs, same gradients w.r.t. params and inputs."""

import jax
import jax.numpy as jnp
import numpy as np

from locojax.models.common.scan_blocks import tap_stride
from locojax.models.locosplat.depth.dinov2 import DinoV2


def _assert_trees_close(a, b, tol):
    """Leaf-wise |a - b| <= tol * max|b| (float32 sums may be reassociated between the two paths); for
    a leaf whose values are all rounding noise (e.g. a key LayerNorm bias's gradient, which softmax's
    shift invariance makes 0), max|b| is at least 1e-3 of the whole tree's."""
    assert jax.tree.structure(a) == jax.tree.structure(b)
    b_leaves = dict(jax.tree_util.tree_leaves_with_path(b))
    scale = max(float(np.abs(np.asarray(y, np.float32)).max()) for y in b_leaves.values())
    for path, x in jax.tree_util.tree_leaves_with_path(a):
        y = np.asarray(b_leaves[path], np.float32)
        atol = tol * max(float(np.abs(y).max()), 1e-3 * scale)
        np.testing.assert_allclose(np.asarray(x, np.float32), y, rtol=0, atol=atol, err_msg=jax.tree_util.keystr(path))


def _random_params(model, *inputs):
    """Params of `model`'s tree (its abstract init: no eager init to pay for) drawn at random, and the
    tree of the unrolled model must be the same."""
    shapes = jax.eval_shape(model.init, jax.random.key(0), *inputs)["params"]
    leaves, tree = jax.tree.flatten(shapes)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    return jax.tree.unflatten(tree, [0.1 * jax.random.normal(k, a.shape, a.dtype) for k, a in zip(keys, leaves)])


def test_tap_stride():
    assert tap_stride(12, (2, 5, 8, 11)) == 3
    assert tap_stride(24, (4, 11, 17, 23)) == 1
    assert tap_stride(6, (5,)) == 6


def test_dinov2_scanned_matches_unrolled():
    """Taps (1, 3): nested scans of 2 blocks (the LocusNet test covers a single scan)."""
    taps = (1, 3)
    kw = dict(dim=16, heads=2, depth=4, taps=taps)
    scanned, unrolled = DinoV2(**kw, scan_layers=True), DinoV2(**kw)
    x = jax.random.normal(jax.random.key(0), (2, 14, 28, 3))
    params = _random_params(scanned, x)
    # the param tree is the unrolled one (DepthAnythingV2's names)
    assert jax.eval_shape(unrolled.init, jax.random.key(0), x)["params"] == jax.eval_shape(
        scanned.init, jax.random.key(0), x)["params"]
    assert sorted(params) == sorted([f"blocks_{i}" for i in range(4)] + ["cls_token", "norm", "patch_embed",
                                                                           "pos_embed"])

    def loss(model):
        def f(p, img):
            outs = model.apply({"params": p}, img)
            return sum(jnp.sum(jnp.sin(3.0 * t) * (k + 1)) + jnp.sum(c ** 2) for k, (t, c) in enumerate(outs)), outs
        return jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))

    (ls, outs_s), grads_s = loss(scanned)(params, x)
    (lu, outs_u), grads_u = loss(unrolled)(params, x)
    assert len(outs_s) == len(taps)
    _assert_trees_close(outs_s, outs_u, 1e-5)
    _assert_trees_close(grads_s, grads_u, 1e-5)
    assert float(jnp.max(jnp.abs(grads_s[0]["blocks_0"]["attn_qkv"]["kernel"]))) > 0  # gradients reach block 0


def test_dinov2_scanned_bf16_keeps_dtype():
    kw = dict(dim=16, heads=2, depth=4, taps=(1, 3), dtype=jnp.bfloat16)
    x = jax.random.normal(jax.random.key(0), (1, 14, 28, 3))
    params = _random_params(DinoV2(**kw), x)
    outs_s = DinoV2(**kw, scan_layers=True).apply({"params": params}, x)
    outs_u = DinoV2(**kw).apply({"params": params}, x)
    assert [t.dtype for t, _ in outs_s] == [t.dtype for t, _ in outs_u]
    _assert_trees_close(outs_s, outs_u, 2e-2)


def test_locusnet_scanned_matches_unrolled():
    """LocusGS (anchors on: the anchors' refinement heads run inside the scanned decoder step; TokenGS
    takes the same path without them); supervised layers (1, 2): a single scan keeping every layer."""
    from locojax.models.locusgs.network import LocusNet, NetConfig
    kw = dict(dim=16, heads=2, patch=8, encoder_layers=2, decoder_layers=2, num_tokens=8, gaussians_per_token=2,
              encoder_layer_scale=1.0, decoder_layer_scale=1.0, supervised_layers=(1, 2), anchors=True,
              refine_radius=True, anchor_self_pe=True, anchor_cross_bias=True, radius_in_bias=True,
              anchored_centres=True, head_xy_grid=0.0, unused_params=False, pe_per_axis=8)
    scanned, unrolled = LocusNet(NetConfig(**kw, scan_layers=True)), LocusNet(NetConfig(**kw))
    rng = np.random.default_rng(0)
    images = jnp.asarray(rng.uniform(size=(1, 2, 16, 16, 3)), jnp.float32)
    c2w = np.tile(np.eye(4, dtype=np.float32), (1, 2, 1, 1))
    c2w[..., :3, 3] = rng.normal(size=(1, 2, 3)) * 0.3
    K = jnp.asarray(np.tile(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (1, 2, 1, 1)))
    params = _random_params(scanned, images, c2w, K)
    assert jax.eval_shape(unrolled.init, jax.random.key(0), images, c2w, K)["params"] == jax.eval_shape(
        scanned.init, jax.random.key(0), images, c2w, K)["params"]
    assert {f"encoder_{i}" for i in range(2)} | {f"decoder_{i}" for i in range(2)} <= set(params)

    def loss(model):
        def f(p, img):
            outs = model.apply({"params": p}, img, c2w, K)
            return sum(jnp.sum(jnp.sin(o.raw)) + jnp.sum(o.mu ** 2) + jnp.sum(o.radius) + jnp.sum(o.bias)
                       for o in outs), outs
        return jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))

    (_, outs_s), grads_s = loss(scanned)(params, images)
    (_, outs_u), grads_u = loss(unrolled)(params, images)
    assert len(outs_s) == 2
    _assert_trees_close(outs_s, outs_u, 1e-5)
    _assert_trees_close(grads_s, grads_u, 1e-5)
    assert float(jnp.max(jnp.abs(grads_s[0]["encoder_0"]["mlp"]["fc1"]["kernel"]))) > 0
