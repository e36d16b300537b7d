"""GlobalSplat against the official PyTorch code's outputs (tests/fixtures/globalsplat/README.md)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.geometry.scene_normalization import globalsplat_normalize
from locojax.models.globalsplat.convert import check_manifest, convert_state_dict, count_params
from locojax.models.globalsplat.decoder import decode_stage, official_regularizer
from locojax.models.common.precision import PrecisionPolicy
from locojax.models.globalsplat.config import ModelConfig
from locojax.models.globalsplat.network import GlobalSplatNet, NetConfig


def _net(**model):
    return NetConfig.from_model(ModelConfig(**model), precision=PrecisionPolicy("float32"), remat=False)


# The fixture's model: GlobalSplat(latent_rep_token_amount=64, dim_latents=64, dim_rays=32,
# dim_rgb_feat=64, num_heads=4), everything else at the 16k values.
FIXTURE_NET = _net(num_latents=64, dim_latents=64, dim_rays=32, dim_rgb=64, num_heads=4)
STAGES = [("s0", 0, 1.0), ("s2_mix05", 2, 0.5), ("s3", 3, 1.0)]


@pytest.fixture(scope="module")
def io(fixtures_dir):
    return dict(np.load(fixtures_dir / "globalsplat" / "globalsplat_tiny_io.npz"))


@pytest.fixture(scope="module")
def candidates(io, fixtures_dir):
    weights = dict(np.load(fixtures_dir / "globalsplat" / "globalsplat_tiny_weights.npz"))
    images = jnp.asarray(io["images"]).transpose(0, 1, 3, 4, 2)  # [B, V, 3, H, W] -> [B, V, H, W, 3]
    h, w = images.shape[2:4]
    K = io["intrinsic"].astype(np.float64)
    K[..., 0, :] /= w
    K[..., 1, :] /= h
    c2w = jnp.asarray(io["normalized_c2w"])[None]
    net = GlobalSplatNet(FIXTURE_NET)
    abstract = jax.eval_shape(net.init, jax.random.PRNGKey(0), images, c2w, jnp.asarray(K, jnp.float32))
    params = convert_state_dict(weights, abstract["params"])
    return net.apply({"params": params}, images, c2w, jnp.asarray(K, jnp.float32))


def test_scene_normalization_matches_official(io):
    norm = globalsplat_normalize(io["raw_c2w"])
    np.testing.assert_allclose(norm.c2w, io["normalized_c2w"], atol=2e-6)
    np.testing.assert_allclose(norm.scale, io["scene_scale"], rtol=1e-6)


@pytest.mark.parametrize("name,stage,mix", STAGES)
def test_decoded_gaussians_match_official(candidates, io, name, stage, mix):
    dec = decode_stage(candidates, stage, mix)
    b, p, g = dec.means.shape[:3]
    assert p * g == io[f"{name}_means"].shape[1] == 64 * 2 ** stage
    got = dict(means=dec.means, scales=dec.scales, rotations=dec.rot6d, sh=dec.sh, opacities=dec.opacities)
    for field, value in got.items():
        ref = io[f"{name}_{field}"]
        value = np.asarray(value).reshape(ref.shape)
        # ~1e-5 of each field's range (rotations: unit vectors, so an absolute 1e-4)
        tol = 1e-4 if field == "rotations" else 2e-5 * np.abs(ref).max()
        np.testing.assert_allclose(value, ref, rtol=0, atol=tol, err_msg=f"{name}_{field}")
    np.testing.assert_allclose(float(official_regularizer(candidates)), float(io[f"{name}_reg"]), rtol=1e-5)


def _abstract_params(net_cfg):
    net = GlobalSplatNet(net_cfg)
    dummy = (jnp.zeros((1, 2, 16, 16, 3)), jnp.zeros((1, 2, 4, 4)), jnp.zeros((1, 2, 3, 3)))
    return jax.eval_shape(net.init, jax.random.PRNGKey(0), *dummy)["params"]


def test_manifest_16k_maps_every_key_and_counts_params(fixtures_dir):
    import configs
    from locojax.models.globalsplat import net_config_from

    manifest = json.loads((fixtures_dir / "globalsplat" / "manifest_16k.json").read_text())
    abstract = _abstract_params(net_config_from(configs.get_config("globalsplat_16k")))
    check_manifest(manifest, abstract)  # raises naming any unmapped / missing / mis-shaped key
    n = count_params(abstract)
    print(f"globalsplat_16k parameters: {n:,}")
    torch_params = sum(int(np.prod(s)) for k, s in manifest.items() if k != "gaussian_decoder.patch_center_bias")
    assert n == torch_params == 84_321_120


def test_converter_names_bad_keys(fixtures_dir):
    manifest = json.loads((fixtures_dir / "globalsplat" / "manifest_16k.json").read_text())
    abstract = _abstract_params(_net())
    broken = dict(manifest)
    del broken["slot_encoder.geo_rounds.2.mem_k.weight"]
    broken["slot_encoder.extra.weight"] = [4, 4]
    broken["scene_tokens"] = [1024, 512]
    with pytest.raises(ValueError) as e:
        check_manifest(broken, abstract)
    msg = str(e.value)
    assert "slot_encoder.extra.weight" in msg
    assert "slot_encoder/geo_rounds_2/mem_k/kernel" in msg
    assert "scene_tokens" in msg
