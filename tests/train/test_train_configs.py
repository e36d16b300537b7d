"""Config names and files, `--config.KEY=VALUE` overrides through ml_collections.config_flags (typed,
checked at parse time), and the entry points' flag handling (help, listing, printing, one-line errors)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import configs
from configs.common import base_config
from experiments import train

SHARED_KEYS = ("total_steps", "batch_size", "log_every", "eval_every", "checkpoint_every", "seed", "dataset")


def test_base_config_takes_the_data_defaults_from_the_data_pipelines():
    from data_pipelines.config import default_data_config

    c = base_config()
    for k in SHARED_KEYS:
        assert k in c, k
    assert c.data.to_dict() == default_data_config().to_dict()


def test_every_family_file_is_found_and_every_name_resolves():
    assert "globalsplat" in configs.families()
    names = configs.config_names()
    assert "globalsplat_16k" in names and "globalsplat_tiny" in names
    for name in names:
        c = configs.get_config(name)
        family = name.split("_")[0]
        # a config family may build another model family (tokengs_* = locusgs with anchors off)
        module = importlib.import_module(f"configs.{family}")
        assert c.model_family == getattr(module, "MODEL_FAMILY", family)
        for k in SHARED_KEYS:
            assert k in c, (name, k)


def test_a_family_file_and_its_preset_equal_the_name():
    by_file = configs.load_config("configs/globalsplat.py:tiny")
    assert by_file.to_dict() == configs.get_config("globalsplat_tiny").to_dict()


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as e:
        configs.get_config("globalsplat_17k")
    msg = str(e.value)
    assert "globalsplat_17k" in msg and "globalsplat_16k" in msg and "globalsplat_tiny" in msg


def test_overrides_take_the_type_of_the_existing_value():
    c = base_config()
    configs.apply_overrides(c, ["total_steps=1000", "optimizer.learning_rate=3", "progress_bar=false",
                                "data.image_shape=32,48", "render.background=1,1,1", "eval.num_scenes=4",
                                "optimizer.group_learning_rates.backbone=2e-6", "dataset=dl3dv",
                                "data.data_dir=/data"])
    assert c.total_steps == 1000 and isinstance(c.total_steps, int)
    assert c.optimizer.learning_rate == 3.0 and isinstance(c.optimizer.learning_rate, float)
    assert c.progress_bar is False
    assert c.data.image_shape == (32, 48)
    assert c.render.background == (1.0, 1.0, 1.0) and all(isinstance(x, float) for x in c.render.background)
    assert c.eval.num_scenes == 4
    assert c.optimizer.group_learning_rates.backbone == 2e-6
    assert c.dataset == "dl3dv" and c.data.data_dir == "/data"


def test_a_stage_list_may_change_length():
    c = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(c, ["model.stage_boundaries=(10,20,30,40)"])
    assert c.model.stage_boundaries == (10, 20, 30, 40)


@pytest.mark.parametrize("bad, match", [
    ("total_stepz=3", r"--config.total_stepz: unknown config key; closest valid keys: total_steps"),
    ("optimizer.learnig_rate=1", r"closest valid keys: optimizer.learning_rate"),
    ("total_steps=abc", r"--config.total_steps=abc: invalid literal for int"),
    ("total_steps=1.5", r"--config.total_steps=1.5"),
    ("progress_bar=maybe", r"--config.progress_bar=maybe"),
    ("optimizer=3", r"--config.optimizer: a section"),
    ("data.image_shape=64", r"--config.data.image_shape: expected a tuple of 2 numbers"),
    ("data.image_shape=1.5,2", r"--config.data.image_shape: expected integers"),
    ("render.background=0,0", r"--config.render.background: expected a tuple of 3 numbers"),
    ("nokey", "KEY=VALUE")])
def test_bad_overrides_name_the_key(bad, match):
    with pytest.raises(ValueError, match=match):
        configs.apply_overrides(configs.get_config("globalsplat_tiny"), [bad])


def test_entry_point_lists_prints_and_refuses_in_one_line(tmp_path, capsys):
    assert train.main(["--config=help"]) == 0
    assert "globalsplat_16k" in capsys.readouterr().out
    assert train.main(["--list_configs"]) == 0
    assert "globalsplat_tiny" in capsys.readouterr().out
    assert train.main(["--config=configs/globalsplat.py:tiny", "--config.total_steps=7", "--print_config"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "total_steps=7" in out and "data.image_shape=64,64" in out and "model_family=globalsplat" in out
    wd = f"--workdir={tmp_path / 'wd'}"
    for argv, message in [
            (["--config=globalsplat_tiny", "--config.data.image_shape=64", wd],
             "error: --config.data.image_shape: expected a tuple of 2 numbers like 64,64, got 1: (64,)"),
            (["--config=globalsplat_tiny", "--config.total_steps=abc", wd],
             "error: flag --config.total_steps=abc: invalid literal for int() with base 10: 'abc'"),
            (["--config=globalsplat_tiny", "--config.eval_evry=3", wd],
             "error: --config.eval_evry: unknown config key; closest valid keys: eval_every, log_every"),
            (["--config=nope", wd], None),
            ([wd], "error: --config is required (e.g. --config=globalsplat_tiny; --config=help lists them)"),
            (["--config=globalsplat_tiny"], "error: --workdir is required")]:
        assert train.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        if message:
            assert err[0] == message
        else:
            assert err[0].startswith("error: --config=nope: Unknown config 'nope'") and "globalsplat_tiny" in err[0]
    assert not (tmp_path / "wd").exists()


def test_train_cli_rejects_unknown_config_at_once(tmp_path):
    p = subprocess.run([sys.executable, "-m", "experiments.train", "--config=nope", f"--workdir={tmp_path}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "globalsplat_tiny" in p.stderr
    assert not (tmp_path / "config.json").exists()


def test_benchmark_dispatcher_lists_and_rejects():
    from experiments import benchmark

    assert benchmark.main(["no_such_benchmark"]) == 2
    assert benchmark.main(["--help"]) == 0
