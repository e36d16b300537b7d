"""GlobalSplat as the trainer sees it: shapes per preset, view-count independence, similarity
invariance through the canonical frame, one training step, no recompilation across stages."""

import sys
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import configs
from locojax.geometry.scene_normalization import canonical_points_to_world, globalsplat_normalize
from locojax.models.globalsplat import build
from locojax.render import quat_to_rotmat as quat_to_matrix
from locojax.types import Views

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from synthetic_views import arc_cameras, random_views, split_batch  # noqa: E402


def tiny_config(**model):
    """globalsplat_tiny's widths with 64 x 4 Gaussians and SH degree 3 (the preset trains SH 0): small,
    and every SH band exercised."""
    config = configs.get_config("globalsplat_tiny")
    model = {"num_latents": 64, "gaussians_per_token": 4, "sh_degree": 3, **model}
    for k, v in model.items():
        config.model[k] = v
    return config


@pytest.mark.parametrize("preset,count", [("16k", 16_384), ("32k", 32_768), ("2k", 2_048), ("tiny", 2_048)])
def test_gaussian_count_and_shapes_per_preset(preset, count):
    config = configs.get_config(f"globalsplat_{preset}")
    model = build(config)
    assert model.num_gaussians == count
    views = jax.eval_shape(lambda: jax.tree_util.tree_map(jnp.asarray, random_views(1, 3, 64, 64)))
    batch = split_batch(random_views(1, 3, 64, 64), 3)
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0), batch)
    pred = jax.eval_shape(lambda p, v: model.predict(p, v, step=jnp.int32(0), train=False), params, views)
    g, aux = pred.gaussians, pred.aux
    assert g.means.shape == (1, count, 3) and g.quats.shape == (1, count, 4)
    assert g.scales.shape == (1, count, 3) and g.opacities.shape == (1, count)
    assert g.sh.shape == (1, count, (config.model.sh_degree + 1) ** 2, 3)  # tiny: degree 0
    assert aux["num_active_gaussians"].shape == (1,)


@pytest.fixture(scope="module")
def tiny_model():
    config = tiny_config()
    model = build(config)
    batch = split_batch(random_views(1, 6, 32, 32), 6)
    params = jax.jit(model.init)(jax.random.PRNGKey(1), batch)
    predict = jax.jit(lambda p, v: model.predict(p, v, step=jnp.int32(0), train=False))
    return model, params, lambda p, v: tuple(getattr(predict(p, v), f) for f in ("gaussians", "aux"))


def test_count_independent_of_view_count(tiny_model):
    model, params, predict = tiny_model
    for v in (12, 24, 36):
        g, aux = predict(params, jax.tree_util.tree_map(jnp.asarray, random_views(1, v, 32, 32, seed=v)))
        assert g.means.shape == (1, model.num_gaussians, 3)
        assert g.sh.shape == (1, model.num_gaussians, 16, 3)
        assert int(aux["num_active_gaussians"][0]) == model.num_gaussians
        assert bool(jnp.all(jnp.isfinite(g.means)))


def test_similarity_invariance_through_canonical_frame(tiny_model):
    model, params, predict = tiny_model
    rng = np.random.default_rng(5)
    raw = arc_cameras(6, seed=2).astype(np.float64)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    sim = np.eye(4)
    sim[:3, :3], sim[:3, 3], scale = q, rng.normal(size=3) * 5, 3.7
    moved = raw.copy()
    moved[:, :3, :3] = q @ raw[:, :3, :3]
    moved[:, :3, 3] = scale * raw[:, :3, 3] @ q.T + sim[:3, 3]
    base = random_views(1, 6, 32, 32, seed=9)
    outs = []
    for cams in (raw, moved):
        norm = globalsplat_normalize(cams.astype(np.float32))
        views = Views(base.images, base.intrinsics, norm.c2w[None], base.near, base.far, base.index)
        g, _ = predict(params, jax.tree_util.tree_map(jnp.asarray, views))
        outs.append((g, norm))
    (ga, na), (gb, nb) = outs
    # identical canonical cameras -> identical canonical scenes
    for f in ("means", "quats", "scales", "opacities", "sh"):
        np.testing.assert_allclose(getattr(ga, f), getattr(gb, f), atol=2e-4, err_msg=f)
    # ... so the world-frame scenes differ by exactly the applied similarity
    world_a = canonical_points_to_world(np.asarray(ga.means[0]), na)
    world_b = canonical_points_to_world(np.asarray(gb.means[0]), nb)
    np.testing.assert_allclose(world_b, scale * world_a @ q.T + sim[:3, 3], atol=2e-3 * scale)
    np.testing.assert_allclose(gb.scales * nb.scale, scale * ga.scales * na.scale, rtol=1e-3)
    # un-normalised world cameras straight into predict (normalize_scene="context"): the model
    # canonicalises them itself and returns Gaussians moved by exactly the same similarity
    outs = []
    for cams in (raw, moved):
        views = Views(base.images, base.intrinsics, cams[None].astype(np.float32), base.near, base.far,
                      base.index)
        outs.append(predict(params, jax.tree_util.tree_map(jnp.asarray, views))[0])
    wa, wb = outs
    np.testing.assert_allclose(wb.means[0], scale * np.asarray(wa.means[0], np.float64) @ q.T + sim[:3, 3],
                               atol=2e-3 * scale)
    np.testing.assert_allclose(wb.scales, scale * np.asarray(wa.scales), rtol=1e-3)
    np.testing.assert_allclose(wb.opacities, wa.opacities, atol=2e-4)
    ra = np.asarray(quat_to_matrix(wa.quats[0]))
    rb = np.asarray(quat_to_matrix(wb.quats[0]))
    np.testing.assert_allclose(rb, q @ ra, atol=2e-3)


def test_bfloat16_and_remat_switches_run():
    # one curriculum branch keeps the compile short; the switches are what is under test
    config = tiny_config(remat=True, curriculum=False, gaussians_per_token=1)
    config.precision = "bfloat16"
    model = build(config)
    batch = split_batch(random_views(1, 4, 32, 32), 4)
    params = jax.jit(model.init)(jax.random.PRNGKey(0), batch)
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(params))
    loss = lambda p: jnp.sum(model.predict(p, jax.tree_util.tree_map(jnp.asarray, batch.context),  # noqa: E731
                                           step=jnp.int32(0), train=False).gaussians.means)
    grads = jax.jit(jax.grad(loss))(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(grads))


@pytest.mark.parametrize("parts", [{}, {"encoder": "float32"}, {"tokenizer": "float32", "heads": "float32"}])
def test_per_module_precision(parts):
    """config.precision=bfloat16 with config.model.precision.<part> overrides: each part's layers
    compute in its dtype (abstract shapes only); the Gaussians stay float32."""
    config = tiny_config()
    config.precision = "bfloat16"
    for part, name in parts.items():
        config.model.precision[part] = name
    assert config.precision == "bfloat16"  # a part's override never writes through to the run-wide key
    model = build(config)
    batch = split_batch(random_views(1, 4, 32, 32), 4)
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0), batch)
    views = jax.tree_util.tree_map(jnp.asarray, batch.context)
    _, state = jax.eval_shape(lambda p: model.net.apply({"params": model.net_params(p)}, views.images, views.c2w,
                                                        views.intrinsics, capture_intermediates=True), params)
    inter = state["intermediates"]
    expected = {part: jnp.dtype(parts.get(part, "bfloat16")) for part in ("tokenizer", "encoder", "heads")}
    got = {"tokenizer": inter["tokenizer"]["rgb_patch_embeds_1"]["__call__"][0].dtype,
           "encoder": inter["slot_encoder"]["__call__"][0][0].dtype,
           "heads": inter["gaussian_decoder"]["geo_pos_readout"]["__call__"][0].dtype}
    assert got == expected
    pred = jax.eval_shape(lambda p: model.predict(p, views, step=jnp.int32(0), train=False), params)
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(pred.gaussians))


def test_config_defaults_round_trip_and_unknown_keys():
    """configs/globalsplat.py's sections are the dataclasses' defaults; a typo names the closest key."""
    import dataclasses

    from locojax.models.globalsplat import LossConfig, ModelConfig
    from locojax.models.globalsplat.config import loss_config_from, model_config_from

    config = configs.get_config("globalsplat_16k")
    assert model_config_from(config.model) == ModelConfig()
    assert loss_config_from(config.loss) == LossConfig()
    assert dataclasses.asdict(model_config_from(tiny_config().model)) != dataclasses.asdict(ModelConfig())
    config.model.unlock()
    config.model.num_latent = 4
    with pytest.raises(ValueError, match="num_latents"):
        build(config)
    config = configs.get_config("globalsplat_tiny")
    config.model.precision.encoder = "float8"
    with pytest.raises(ValueError, match="model.precision.encoder"):
        build(config)


def test_training_step_lowers_loss_and_stages_do_not_recompile():
    from locojax.render.factory import make_render_fn, render_sets

    config = tiny_config()
    render = make_render_fn(config.render, 3)
    model = build(config)
    batch = jax.tree_util.tree_map(jnp.asarray, split_batch(random_views(2, 10, 32, 32, seed=3), 6))
    params = model.init(jax.random.PRNGKey(0), batch)
    tx = optax.adamw(3e-3)

    def loss_fn(p, step):
        pred = model.predict(p, batch.context, step=step, train=True, rng=None)
        terms = model.loss_terms(p, batch, pred, render_sets(render, pred.render_sets(), batch.target), step=step)
        assert {"mse", "perceptual", "frustum", "decoder_reg", "consistency_alpha",
                "consistency_depth"} == set(terms)  # the official terms; the paper-only opacity term is off
        return sum(t.weight * t.value for t in terms.values())

    @jax.jit
    def train_step(p, opt, step):
        loss, grads = jax.value_and_grad(loss_fn)(p, step)
        updates, opt = tx.update(grads, opt, p)
        return optax.apply_updates(p, updates), opt, loss

    opt = tx.init(params)
    losses = []
    for _ in range(3):  # the same batch at step 0: the loss reported before each update
        params, opt, loss = train_step(params, opt, jnp.int32(0))
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    # every curriculum stage and transition (boundaries 150, 300, 600; ramp 50) through one executable
    for step in (160, 175, 320, 650, 5000):
        params, opt, loss = train_step(params, opt, jnp.int32(step))
        assert np.isfinite(float(loss))
    assert train_step._cache_size() == 1
