"""The family contract (locojax/models/interface.py), checked the same way for every config family
found in configs/ (`configs.families()`): init -> predict -> loss_terms -> one jitted training step
with the trainer's own optimizer, renderer and step, on the tiny preset at 32 px.

Checks: the final set holds `model.num_gaussians` Gaussians, extra sets are batched Gaussians (the
trainer renders them), `param_labels` is a tree of group names shaped like the params, loss, metrics and
updated params are finite, and two different batches run on one compilation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.models.registry import build_model
from locojax.render.factory import make_render_fn
from locojax.train.optimizer import make_optimizer
from locojax.train.state import make_init_fn
from locojax.train.step import make_train_step
from locojax.types import Batch, Views

SIZE = 32


def _views(rng, v, near, far):
    """v cameras on a short arc looking at the origin from ~2.5 units, blocky random images."""
    kk = np.broadcast_to(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (1, v, 3, 3))
    c2w = np.zeros((1, v, 4, 4), np.float32)
    for i, a in enumerate(np.linspace(-0.2, 0.2, v) + rng.uniform(-0.02, 0.02)):
        centre = np.array([2.5 * np.sin(a), 0.0, -2.5 * np.cos(a)])
        z = -centre / np.linalg.norm(centre)
        x = np.cross([0.0, 1.0, 0.0], z)
        x /= np.linalg.norm(x)
        c2w[0, i, :3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
        c2w[0, i, :3, 3] = centre
        c2w[0, i, 3, 3] = 1.0
    img = np.repeat(np.repeat(rng.uniform(0, 1, (1, v, SIZE // 8, SIZE // 8, 3)), 8, 2), 8, 3)
    return Views(images=jnp.asarray(img, jnp.float32), intrinsics=jnp.asarray(kk), c2w=jnp.asarray(c2w),
                 near=jnp.full((1, v), near, jnp.float32), far=jnp.full((1, v), far, jnp.float32),
                 index=jnp.asarray(np.arange(v)[None] * 3, jnp.int32))


def _batch(config, seed):
    rng = np.random.default_rng(seed)
    near = float(config.data.get("near") or 0.5)
    far = float(config.data.get("far") or 15.0)
    ctx = _views(rng, int(config.data.num_context_views), near, far)
    tgt = _views(rng, 2, near, far)
    return Batch(context=ctx, target=tgt, scene_id=jnp.zeros((1,), jnp.int32))


def _tiny(family):
    config = configs.get_config(f"{family}_tiny")
    config.data.image_shape = (SIZE, SIZE)
    config.batch_size = 1
    config.total_steps = 10
    return config


@pytest.mark.long_running  # one compile of each family's training step
@pytest.mark.parametrize("family", sorted(f for f, presets in configs.families().items() if "tiny" in presets))
def test_family_contract(family):
    config = _tiny(family)
    model = build_model(config)
    batch = _batch(config, 0)

    params = model.init(jax.random.PRNGKey(0), batch)
    labels = model.param_labels(params)
    assert jax.tree_util.tree_structure(labels) == jax.tree_util.tree_structure(params)
    assert all(isinstance(x, str) and x for x in jax.tree_util.tree_leaves(labels))

    pred = jax.eval_shape(lambda p, c: model.predict(p, c, step=jnp.int32(0), train=True,
                                                     rng=jax.random.PRNGKey(1)), params, batch.context)
    assert pred.gaussians.means.shape == (1, model.num_gaussians, 3)
    for name, g in pred.extra.items():
        assert g.means.shape[0] == 1 and g.means.shape[-1] == 3, name

    tx, schedule = make_optimizer(config, params, labels)
    render = make_render_fn(config.render, model.sh_degree)
    step = jax.jit(make_train_step(model, tx, schedule, render))
    state = make_init_fn(model, tx)(jax.random.PRNGKey(0), batch)

    state, metrics = step(state, batch)
    state, metrics2 = step(state, _batch(config, 1))
    assert step._cache_size() == 1  # one compilation for two batches
    for m in (metrics, metrics2):
        assert np.isfinite(float(m["loss"])) and int(m["skipped"]) == 0, m
        for k, v in m.items():
            assert np.all(np.isfinite(np.asarray(v))), (k, v)
    assert any(k.startswith("loss/") for k in metrics)
    assert int(state.step) == 2
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(state.params))
