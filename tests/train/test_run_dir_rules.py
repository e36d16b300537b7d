"""The workdir's rules on reruns (issue 16): a finished run says so; resume may extend total_steps and
change cadence/path/evaluation keys (logged), not model/optimizer/data keys (one line naming them);
config.json appears only once setup succeeded, and a workdir without a checkpoint takes a corrected
config; evaluate uses the run's own config.json and may change evaluation keys only. Each refusal
leaves every file written before unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from locojax.train.loop import train_and_evaluate
from locojax.train.run import DataSource
from locojax.train.run_dir import ConfigMismatchError, save_config
from train_toy_setup import toy_config, toy_data, toy_model

TOTAL = 4


def _files(workdir) -> dict:
    """{relative path: sha1} of every file under workdir."""
    out = {}
    for root, _, names in os.walk(workdir):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, workdir)] = hashlib.sha1(f.read()).hexdigest()
    return out


def _train(config, workdir, data=None):
    return train_and_evaluate(config, str(workdir), model=toy_model(config), data=data or toy_data())


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("rules") / "wd"
    _train(toy_config(total_steps=TOTAL, eval_every=100, checkpoint_every=2), workdir)
    return workdir


@pytest.fixture
def run_copy(finished, tmp_path):
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd)
    return wd


def test_rerun_of_a_finished_run_says_so_and_writes_nothing(run_copy, capsys):
    before = _files(run_copy)
    out = _train(toy_config(total_steps=TOTAL, eval_every=100, checkpoint_every=2), run_copy)
    assert out["step"] == TOTAL and out["finished"]
    assert f"is already at its last step {TOTAL} (total_steps={TOTAL})" in capsys.readouterr().out
    assert _files(run_copy) == before


@pytest.mark.parametrize("key, value", [("optimizer.learning_rate", 1e-3), ("model.hidden", 8),
                                        ("data.image_shape", (8, 8)), ("seed", 1)])
def test_model_optimizer_data_keys_are_refused_in_one_line(run_copy, key, value):
    before = _files(run_copy)
    config = toy_config(total_steps=TOTAL, eval_every=100, checkpoint_every=2, **{key: value})
    with pytest.raises(ConfigMismatchError) as e:
        _train(config, run_copy)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and "cannot change" in msg and "total_steps" not in msg
    assert _files(run_copy) == before


def test_resume_extends_total_steps_and_changes_cadence_and_paths(run_copy, capsys):
    config = toy_config(total_steps=TOTAL + 2, eval_every=100, checkpoint_every=3, log_every=2,
                        **{"data.data_dir": str(run_copy / "elsewhere"), "data.prefetch": 0,
                           "eval.num_sample_images": 0})
    out = _train(config, run_copy)
    assert out["step"] == TOTAL + 2
    log = capsys.readouterr().out
    line = next(x for x in log.splitlines() if x.startswith("resuming"))
    for key in ("total_steps 4 -> 6", "checkpoint_every 2 -> 3", "log_every 1 -> 2", "data.data_dir",
                "data.prefetch 2 -> 0", "eval.num_sample_images 1 -> 0"):
        assert key in line, (key, line)
    saved = json.load(open(run_copy / "config.json"))
    assert saved["total_steps"] == TOTAL + 2 and saved["checkpoint_every"] == 3
    run = json.load(open(run_copy / "run.json"))
    assert run["resumed_from_step"] == TOTAL and ["total_steps", "4", "6"] in run["config_changes"]


class _FailingData:
    def make_train_iterator(self, config, **kw):
        raise RuntimeError("no such dataset (a setup failure)")

    make_eval_iterator = make_train_iterator


def test_config_json_only_after_setup_and_a_corrected_rerun_is_accepted(tmp_path, capsys):
    wd = tmp_path / "wd"
    bad = toy_config(total_steps=1, eval_every=100)
    with pytest.raises(RuntimeError, match="setup failure"):
        _train(bad, wd, data=DataSource(_FailingData().make_train_iterator, _FailingData().make_eval_iterator))
    assert not (wd / "config.json").exists()
    # A workdir whose config.json came from a run that never checkpointed takes a corrected config.
    save_config(toy_config(total_steps=1, eval_every=100, **{"optimizer.learning_rate": 9.0}), str(wd))
    out = _train(toy_config(total_steps=1, eval_every=100), wd)
    assert out["step"] == 1
    log = capsys.readouterr().out
    assert "held another config but no checkpoint; replacing it: optimizer.learning_rate 9.0 -> 0.05" in log
    assert json.load(open(wd / "config.json"))["optimizer"]["learning_rate"] == 0.05


def test_evaluate_may_change_evaluation_keys_only(finished):
    from locojax.train.eval_run import evaluate_checkpoint

    before = _files(finished)
    config = toy_config(total_steps=TOTAL, eval_every=100, checkpoint_every=2, **{"eval.num_scenes": 2})
    out = evaluate_checkpoint(config, str(finished), model=toy_model(config), data=toy_data(), verbose=False)
    assert len(out["results"]) == 2
    other = toy_config(total_steps=TOTAL, eval_every=100, checkpoint_every=2, **{"model.num_gaussians": 16})
    after_eval = _files(finished)
    with pytest.raises(ConfigMismatchError) as e:
        evaluate_checkpoint(other, str(finished), model=toy_model(other), data=toy_data(), verbose=False)
    assert "\n" not in str(e.value) and "model.num_gaussians" in str(e.value)
    assert _files(finished) == after_eval and set(before) <= set(after_eval)


def test_cli_evaluate_defaults_to_the_runs_config_and_train_cli_refuses_in_one_line(tiny_run, tmp_path, capsys):
    from experiments import evaluate, train

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run["workdir"], wd)
    before = _files(wd)
    overrides = [f"--config.{o}" for o in tiny_run["overrides"]]
    assert train.main(["--config=globalsplat_tiny", f"--workdir={wd}", *overrides,
                       "--config.optimizer.learning_rate=0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "optimizer.learning_rate 0.001 -> 0.5" in err[0], err
    assert train.main(["--config=globalsplat_tiny", f"--workdir={wd}", *overrides]) == 0
    assert "already at its last step 2" in capsys.readouterr().out
    assert train.main([f"--workdir={wd}"]) == 0  # no --config: the run's own config.json
    assert "already at its last step 2" in capsys.readouterr().out
    assert evaluate.main([f"--workdir={wd}", "--config.model.num_latents=8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.num_latents 64 -> 8" in err[0], err
    assert _files(wd) == before
    # no --config: the run's own config.json; an evaluation key may differ
    assert evaluate.main([f"--workdir={wd}", "--num_scenes=1", "--config.eval.lpips=false"]) == 0
    out = capsys.readouterr().out
    assert "synthetic @ step 2" in out
    assert "nan" not in out and out.count("    off ") == 2  # LPIPS not computed: says so (scene + mean rows)
