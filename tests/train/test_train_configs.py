"""Config names, typed `--config.KEY=VALUE` overrides, and the entry points' argument handling."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import configs
from configs.common import base_config

SHARED_KEYS = ("total_steps", "batch_size", "log_every", "eval_every", "checkpoint_every", "seed", "dataset")


def test_base_config_has_shared_keys():
    c = base_config()
    for k in SHARED_KEYS:
        assert k in c, k
    assert c.dataset == "synthetic"
    for k in ("image_shape", "num_context_views", "num_target_views", "eval_protocol"):
        assert k in c.data, k


def test_every_name_resolves_with_its_family():
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


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as e:
        configs.get_config("globalsplat_17k")
    msg = str(e.value)
    assert "globalsplat_17k" in msg and "globalsplat_16k" in msg and "globalsplat_tiny" in msg


def test_overrides_take_the_type_of_the_existing_value():
    c = base_config()
    configs.apply_overrides(c, ["total_steps=1e3", "optimizer.learning_rate=3", "progress_bar=false",
                                "data.image_shape=32,48", "render.background=1,1,1", "eval.num_scenes=4",
                                "optimizer.group_learning_rates.backbone=2e-6", "dataset=dl3dv"])
    assert c.total_steps == 1000 and isinstance(c.total_steps, int)
    assert c.optimizer.learning_rate == 3.0 and isinstance(c.optimizer.learning_rate, float)
    assert c.progress_bar is False
    assert tuple(c.data.image_shape) == (32, 48)
    assert tuple(c.render.background) == (1.0, 1.0, 1.0)
    assert c.eval.num_scenes == 4
    assert c.optimizer.group_learning_rates.backbone == 2e-6
    assert c.dataset == "dl3dv"


@pytest.mark.parametrize("bad, match", [("total_stepz=3", "total_steps"), ("total_steps=1.5", "int"),
                                        ("progress_bar=maybe", "bool"), ("optimizer=3", "section"),
                                        ("nokey", "KEY=VALUE")])
def test_bad_overrides_name_the_key(bad, match):
    with pytest.raises(ValueError, match=match):
        configs.apply_overrides(base_config(), [bad])


def test_parse_overrides_splits_argv():
    ov, rest = configs.parse_overrides(["--config=x", "--config.a=1", "--workdir", "w", "--config.b", "2"])
    assert ov == ["a=1", "b=2"] and rest == ["--config=x", "--workdir", "w"]


def test_train_cli_rejects_unknown_config_at_once(tmp_path):
    p = subprocess.run([sys.executable, "-m", "experiments.train", "--config=nope", f"--workdir={tmp_path}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "globalsplat_tiny" in p.stderr
    assert not (tmp_path / "config.json").exists()


def test_benchmark_dispatcher_lists_and_rejects():
    from experiments import benchmark

    assert benchmark.main(["no_such_benchmark"]) == 2
    assert benchmark.main(["--help"]) == 0
