"""`experiments.expand_tokens`: a tiny LocusGS run's checkpoint -> the fine-tune start at 4x the tokens
(official: trained tokens copied, repeats + N(0, 0.01^2); anchors and radii expanded the same way)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import configs

TINY = ("model.dim=16", "model.heads=2", "model.decoder_layers=2", "model.supervised_layers=(1,2)",
        "model.num_tokens=8", "model.gaussians_per_token=2", "data.image_shape=(16,16)")


def _config(n_tokens=8):
    config = configs.get_config("locusgs_tiny")
    configs.apply_overrides(config, TINY)
    config.model.num_tokens = n_tokens
    return config


@pytest.fixture(scope="module")
def src_run(tmp_path_factory):
    """A tiny run directory: config.json + checkpoint 3 of a freshly initialised state whose per-token
    params are perturbed (so that copies are told apart from a re-initialisation)."""
    from locojax.train import checkpoint as ckpt
    from locojax.train.run import build_run, placeholder_batch
    from locojax.train.run_dir import check_or_save_config
    from locojax.train.state import create_state

    root = tmp_path_factory.mktemp("expand")
    config = _config()
    run = build_run(config, placeholder_batch(config))
    state = create_state(run.init_fn, jax.random.PRNGKey(1), run.example_batch, run.state_shardings)
    params = jax.device_get(state.params)
    rng = np.random.default_rng(0)
    for k in ("gs_tokens", "anchor_mu", "anchor_rho"):
        params[k] = params[k] + rng.normal(size=params[k].shape).astype(np.float32)
    state = state.replace(params=params)
    check_or_save_config(config, str(root / "src"), write=True)
    manager = ckpt.make_manager(str(root / "src"), 3, async_save=False)
    ckpt.save(manager, 3, state, {"processes": []})
    manager.wait_until_finished()
    manager.close()
    return dict(root=root, params=params)


def test_expanded_checkpoint(src_run):
    from experiments import expand_tokens
    from flax import traverse_util
    from locojax.train import checkpoint as ckpt

    dst = src_run["root"] / "dst"
    assert expand_tokens.main([f"--workdir={src_run['root'] / 'src'}", f"--to={dst}", "--num_tokens=32"]) == 0
    assert json.load(open(dst / "config.json"))["model"]["num_tokens"] == 32
    manager = ckpt.make_manager(str(dst), 3, async_save=False)
    assert list(manager.all_steps()) == [0]
    got = ckpt.restore_raw_params(manager, 0)
    manager.close()
    src = src_run["params"]
    for k in ("gs_tokens", "anchor_mu", "anchor_rho"):
        old, new = np.asarray(src[k]), np.asarray(got[k])
        assert new.shape == (32,) + old.shape[1:]
        np.testing.assert_array_equal(new[:8], old)                  # trained tokens unchanged
        noise = new[8:] - np.tile(old, (3,) + (1,) * (old.ndim - 1))  # token i <- token i mod 8 + noise
        assert np.all(noise != 0) and 0.005 < noise.std() < 0.02 and abs(noise.mean()) < 0.005
    flat_src, flat_got = traverse_util.flatten_dict(src), traverse_util.flatten_dict(got)
    assert set(flat_src) == set(flat_got)
    for p, v in flat_src.items():
        if p[0] not in ("gs_tokens", "anchor_mu", "anchor_rho"):
            np.testing.assert_array_equal(flat_got[p], v)


def test_expanded_run_starts_a_larger_run(src_run):
    """`train --init_from=DST` accepts it for a 32-token config (and a 16-token one is refused)."""
    from locojax.train.import_run import init_params_from
    from locojax.train.run import build_run, placeholder_batch

    dst = src_run["root"] / "dst"
    config = _config(32)
    params, step = init_params_from(str(dst), build_run(config, placeholder_batch(config)))
    assert step == 0 and params["gs_tokens"].shape == (32, 16)
    with pytest.raises(ValueError, match="gs_tokens"):
        init_params_from(str(dst), build_run(_config(16), placeholder_batch(_config(16))))


def test_bad_inputs(src_run, tmp_path, capsys):
    from experiments import expand_tokens

    src = src_run["root"] / "src"
    assert expand_tokens.main([f"--workdir={src}", f"--to={tmp_path / 'x'}", "--num_tokens=4"]) == 2
    assert "--num_tokens=4 < the run's config.model.num_tokens=8" in capsys.readouterr().err
