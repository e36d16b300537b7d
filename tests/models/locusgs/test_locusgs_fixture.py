"""The Flax TokenGS/LocusGS port against the official PyTorch code at tiny width
(tests/fixtures/locusgs/locusgs_tiny.npz, made by tests/fixtures/locusgs/make_fixture.py): Plücker
rays, head activations, the anchor-to-ray bias map, one decoder layer (with and without anchors) and
the full forward, with weights loaded through `locojax.models.locusgs.convert`."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import locusgs as locusgs_configs
from locojax.models.common.rays import patch_pooled_rays, plucker_rays
from locojax.models.locusgs import net_config_from
from locojax.models.locusgs.convert import abstract_params, check_manifest, convert_state_dict, import_weights
from locojax.models.locusgs.decode import SH_C0, decode
from locojax.models.locusgs.network import DecoderLayer, LocusNet, radius_of, ray_bias

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "locusgs", "locusgs_tiny.npz")


@pytest.fixture(scope="module")
def fx():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def tiny_config(fx, anchors: bool):
    t = json.loads(str(fx["config"]))
    config = locusgs_configs.get_config("tiny", anchors=anchors)
    m = config.model
    m.dim, m.heads, m.patch = t["dim"], t["heads"], t["patch"]
    m.encoder_layers, m.decoder_layers = t["enc_depth"], t["dec_depth"]
    m.num_tokens, m.gaussians_per_token = t["tokens"], t["gaussians"]
    m.supervised_layers = tuple(t["supervised"]) if anchors else (t["dec_depth"],)
    m.unused_params = anchors  # the official LocusGS module holds them
    m.scale_max = 0.075  # the official head's cap (the tiny preset raises it for 64 px)
    m.pose_scale = "1.0"  # the fixture's cameras are in the official network frame already
    config.loss.layer_weights = (1.0,) * len(m.supervised_layers)
    config.data.image_shape = (t["img"], t["img"])
    config.data.num_context_views = t["views"]
    return config


def state_dict(fx, mode):
    pre = f"{mode}/sd/"
    return {k[len(pre):]: v for k, v in fx.items() if k.startswith(pre)}


def close(ours, ref, tol=1e-5):
    """float32 agreement: |ours - ref| <= tol * max(1, max|ref|) + 1e-4 |ref|."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=tol * max(1.0, float(np.abs(ref).max())))


def official_layout(g):
    """Our Gaussians -> the official [B, N * G, 14] (pos3, opacity1, scale3, rot4, rgb3)."""
    rgb = g.sh[..., 0, :] * SH_C0 + 0.5
    return np.concatenate([g.means, g.opacities[..., None], g.scales, g.quats, rgb], axis=-1)


def heads_to_ours(x):
    """Official keys/values [B, H, N, dh] -> [B, N, H * dh]."""
    b, h, n, d = x.shape
    return jnp.asarray(x.transpose(0, 2, 1, 3).reshape(b, n, h * d))


@pytest.fixture(scope="module", params=["tokengs", "locusgs"])
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def setup(fx, mode):
    config = tiny_config(fx, anchors=mode == "locusgs")
    return config, import_weights(state_dict(fx, mode), config)


def test_plucker_rays_and_patch_rays(fx):
    rays = plucker_rays(jnp.asarray(fx["c2w"]), jnp.asarray(fx["k_norm"]), 32, 32, layout="moment_first")
    close(rays, fx["plucker"])
    close(patch_pooled_rays(rays, 8).reshape(1, -1, 6), fx["locusgs/patch_rays"])


def test_head_activations(fx, mode):
    t = json.loads(str(fx["config"]))
    if mode == "tokengs":
        cases = [(fx["tokengs/head_raw"], None, None, fx["tokengs/gaussians"])]
    else:
        cases = [(fx[f"locusgs/head_raw_{l}"], fx[f"locusgs/mu_out_{l}"], fx[f"locusgs/radius_out_{l}"][..., 0],
                  fx[f"locusgs/gaussians_{l}"]) for l in t["supervised"]]
    for raw, mu, r, want in cases:
        if mu is None:
            mu, r = np.zeros(raw.shape[:2] + (3,), np.float32), np.ones(raw.shape[:2], np.float32)
        g = decode(jnp.asarray(raw), jnp.asarray(mu), jnp.asarray(r), anchored=mode == "locusgs")
        close(official_layout(g), want)


def test_head_activations_at_the_clamps(fx):
    """Raw values past the code's clamps (positions +-100 / +-1000, log-scale +-10, quaternion eps)."""
    raw = fx["locusgs/head_extreme_raw"]
    ones = np.ones(raw.shape[:2], np.float32)
    g = decode(jnp.asarray(raw), jnp.zeros(raw.shape[:2] + (3,)), jnp.asarray(ones), anchored=True)
    close(official_layout(g), fx["locusgs/head_extreme"])


def test_free_centres_have_no_z_offset(fx):
    """LocusGS "free_center" ablation: centres = pos_act(raw), no z + 1 (unlike TokenGS); the official
    anchored centres are mu + r * pos_act(raw), so pos_act(raw) = (centre - mu) / r."""
    raw, mu, r = fx["locusgs/head_raw_2"], fx["locusgs/mu_out_2"], fx["locusgs/radius_out_2"]
    g = decode(jnp.asarray(raw), jnp.asarray(mu), jnp.asarray(r[..., 0]), anchored=False, z_offset=0.0)
    n, k = raw.shape[1], raw.shape[2]
    want = (fx["locusgs/gaussians_2"][..., :3] - np.repeat(mu, k, axis=1)) / np.repeat(r, k, axis=1)
    close(g.means, want)
    assert n * k == want.shape[1]


def test_ray_bias_map(fx):
    for layer in (1, 2):
        mu, r = fx[f"locusgs/mu_in_{layer}"], fx[f"locusgs/radius_in_{layer}"][..., 0]
        bias = ray_bias(jnp.asarray(mu), jnp.asarray(r), jnp.asarray(fx["locusgs/patch_rays"]),
                        sigma_ratio=0.1, sigma2_floor=1e-3, clamp=20.0)
        want = fx[f"locusgs/geo_bias_{layer}"]
        # the map must exercise the Gaussian part, not only the -20 clamp
        assert ((want > -19.0) & (want < -0.01)).mean() > 0.2
        close(bias, want, tol=1e-6)


@pytest.mark.parametrize("query_chunk", [None, 4])
def test_one_decoder_layer(fx, setup, mode, query_chunk):
    config, params = setup
    cfg = net_config_from(config)
    cfg = type(cfg)(**{**cfg.__dict__, "query_chunk": query_chunk})
    k, v = heads_to_ours(fx[f"{mode}/keys"]), heads_to_ours(fx[f"{mode}/values"])
    layer = 2  # the second layer: its inputs are refined tokens and anchors
    if mode == "locusgs":
        x, mu = fx[f"locusgs/tokens_in_{layer}"], jnp.asarray(fx[f"locusgs/mu_in_{layer}"])
        r = jnp.asarray(fx[f"locusgs/radius_in_{layer}"][..., 0])
        bias = ray_bias(mu, r, jnp.asarray(fx["locusgs/patch_rays"]), sigma_ratio=0.1, sigma2_floor=1e-3, clamp=20.0)
        bias = (jax.nn.softplus(params["bias_gamma"][layer - 1]) * bias)[:, None]
        want = fx[f"locusgs/tokens_out_{layer}"]
    else:
        x, mu, bias = fx[f"tokengs/tokens_{layer - 1}"], None, None
        want = fx[f"tokengs/tokens_{layer}"]
    out = DecoderLayer(cfg).apply({"params": params[f"decoder_{layer - 1}"]}, jnp.asarray(x), k, v, mu, bias)
    close(out, want)


def test_full_forward(fx, setup, mode):
    config, params = setup
    net = LocusNet(net_config_from(config))
    outs = net.apply({"params": params}, jnp.asarray(fx["images"]), jnp.asarray(fx["c2w"]), jnp.asarray(fx["k_norm"]))
    layers = net.cfg.supervised_layers
    assert len(outs) == len(layers)
    for layer, o in zip(layers, outs):
        g = decode(o.raw, o.mu, o.radius, anchored=mode == "locusgs")
        if mode == "locusgs":
            close(o.mu, fx[f"locusgs/mu_out_{layer}"])
            close(o.radius, fx[f"locusgs/radius_out_{layer}"][..., 0])
            close(o.bias, fx[f"locusgs/geo_bias_{layer}"], tol=1e-5)
            close(official_layout(g), fx[f"locusgs/gaussians_{layer}"])
        else:
            close(official_layout(g), fx["tokengs/gaussians"])


def test_bfloat16_forward_keeps_anchors_float32(fx):
    """precision=bfloat16 (the paper's training): anchors, radii, the bias map and the head output stay
    float32 (abstract evaluation: XLA's bf16 on CPU is too slow for a unit test; measured once: max
    |diff| to the float32 official Gaussians 1.3e-2, to the anchors 4e-3)."""
    config = tiny_config(fx, anchors=True)
    config.precision = "bfloat16"
    net = LocusNet(net_config_from(config))
    params = import_weights(state_dict(fx, "locusgs"), config)
    outs = jax.eval_shape(lambda: net.apply({"params": params}, jnp.asarray(fx["images"]), jnp.asarray(fx["c2w"]),
                                            jnp.asarray(fx["k_norm"])))
    for o in outs:
        assert all(a.dtype == jnp.float32 for a in (o.raw, o.mu, o.radius, o.bias))


def test_radius_activation(fx):
    rho = fx["locusgs/sd/gs_anchor_radius_raw"][None]
    close(radius_of(jnp.asarray(rho[..., 0])), fx["locusgs/radius_in_1"][..., 0])


def test_converter_names_stray_and_missing_keys(fx, setup, mode):
    config, params = setup
    sd = state_dict(fx, mode)
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    with pytest.raises(ValueError, match="extra_head.weight"):
        convert_state_dict({**sd, "extra_head.weight": np.zeros((2, 2), np.float32)}, abstract)
    dropped = {k: v for k, v in sd.items() if k != "enc_dec_backbone.kv_proj.bias"}
    with pytest.raises(ValueError, match="kv_proj/bias"):
        convert_state_dict(dropped, abstract)
    wrong = {**sd, "gs_tokens": np.zeros((3, 3), np.float32)}
    with pytest.raises(ValueError, match="gs_tokens"):
        convert_state_dict(wrong, abstract)
    other = tiny_config(fx, anchors=mode != "locusgs")
    with pytest.raises(ValueError, match="anchors="):
        import_weights(sd, other)
    if mode == "locusgs":  # the official module's never-used LayerNorms / tau_sample need unused_params
        config.model.unused_params = False
        try:
            with pytest.raises(ValueError, match="unused_params=True"):
                import_weights(sd, config)
        finally:
            config.model.unused_params = True


@pytest.mark.parametrize("name", ["tokengs_1024", "tokengs_4096", "locusgs_1024", "locusgs_4096"])
def test_full_size_official_layout_maps_one_to_one(fx, name):
    """The official modules' state_dict layouts at the paper's sizes (shapes only, built on torch's
    meta device) map 1:1 onto the presets' params (abstract shapes, no memory)."""
    family, preset = name.split("_")
    manifest = json.loads(str(fx[f"manifest/{name}"]))
    config = locusgs_configs.get_config(preset, anchors=family == "locusgs")
    abstract = abstract_params(config)
    check_manifest(manifest, abstract)
    n = sum(int(np.prod(s)) for s in manifest.values())
    assert n == sum(int(np.prod(a.shape)) for a in jax.tree_util.tree_leaves(abstract))
    assert n == {"tokengs_1024": 218_871_040, "tokengs_4096": 222_016_768, "locusgs_1024": 238_356_764,
                 "locusgs_4096": 241_514_780}[name]  # the issue's / paper's counts


def test_predict_in_a_world_frame(fx, setup, mode):
    """`LocusModel.predict` on the fixture's cameras moved by a rigid T: the network sees poses relative
    to view 0 (as the official data pipeline feeds it) and the Gaussians come back as T x (official)."""
    from locojax.models.locusgs import build
    from locojax.types import Views

    config, params = setup
    ang = 0.7
    T = np.eye(4, dtype=np.float32)
    T[:3, :3] = [[np.cos(ang), -np.sin(ang), 0], [np.sin(ang), np.cos(ang), 0], [0, 0, 1]]
    T[:3, 3] = [1.5, -0.4, 2.0]
    v = fx["c2w"].shape[1]
    context = Views(images=jnp.asarray(fx["images"]), intrinsics=jnp.asarray(fx["k_norm"]),
                    c2w=jnp.asarray(T @ fx["c2w"]), near=jnp.ones((1, v)), far=jnp.ones((1, v)),
                    index=jnp.zeros((1, v), jnp.int32))
    pred = build(config).predict(params, context)
    last = config.model.supervised_layers[-1]
    ref = fx["tokengs/gaussians"] if mode == "tokengs" else fx[f"locusgs/gaussians_{last}"]
    close(pred.gaussians.means, ref[..., :3] @ T[:3, :3].T + T[:3, 3], tol=2e-5)
    close(pred.gaussians.opacities, ref[..., 3])
    close(pred.gaussians.scales, ref[..., 4:7])


def test_ablation_checkpoints_without_unused_modules(fx):
    """Official ablation modules lack what they never use (content-only self-attention: no
    anchor_head_self_attn; no radius refinement: no radius_embed): those params may be absent and
    keep their initialisation; any other missing key is still an error."""
    config = tiny_config(fx, anchors=True)
    config.model.anchor_self_pe = False
    config.model.refine_radius = False
    sd = {k: v for k, v in state_dict(fx, "locusgs").items()
          if "anchor_head_self_attn" not in k and not k.startswith("radius_embed")}
    params = import_weights(sd, config)
    assert "pe_mlp" not in params["decoder_0"] and "drho_head" not in params and "dmu_head" in params
    with pytest.raises(ValueError, match="dmu_head"):
        import_weights({k: v for k, v in sd.items() if not k.startswith("xyz_embed")}, config)
