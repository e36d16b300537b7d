"""End-to-end run of the trainer in-process on the toy family: records written, no recompilation,
non-finite steps skipped / stopping, evaluation of a checkpoint with .ply export, config refusal."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

from locojax.train.loop import NonFiniteError, train_and_evaluate
from locojax.train.run_dir import ConfigMismatchError
from train_toy_setup import toy_config, toy_data, toy_model

TOTAL = 6


class CompileCounter:
    def __init__(self):
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            self.count += 1


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("toy_run"))
    config = toy_config(total_steps=TOTAL, eval_every=3, checkpoint_every=2)
    config.model.nan_steps = (4,)  # the 5th step is non-finite: skipped, counted
    counter = CompileCounter()
    per_step = {}

    def hook(step, state, metrics):
        per_step[step] = dict(compiles=counter.count,
                              params=jax.tree_util.tree_map(np.array, state.params),
                              skipped=int(metrics["skipped"]))

    out = train_and_evaluate(config, workdir, model=toy_model(config), data=toy_data(), hooks=[hook])
    return dict(workdir=workdir, config=config, out=out, per_step=per_step)


def _records(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_no_recompilation_after_first_step(toy_run):
    # Steps see different data, an evaluation (step 3), a skipped non-finite step and checkpoints.
    counts = {s: v["compiles"] for s, v in toy_run["per_step"].items()}
    assert counts[TOTAL] == counts[1], counts


def test_metrics_records(toy_run):
    recs = _records(toy_run["workdir"])
    train = [r for r in recs if "split" not in r]
    evals = [r for r in recs if r.get("split") == "test"]
    assert [r["step"] for r in train] == list(range(1, TOTAL + 1))
    for r in train:
        for key in ("loss", "loss/mse", "loss/color_reg", "psnr", "lr", "steps_per_sec", "overflow"):
            assert key in r, key
    assert [r["step"] for r in evals] == [0, 3, 6]  # before the first step, every 3, after the last
    for r in evals:
        assert np.isfinite(r["psnr"]) and np.isfinite(r["ssim"]) and "lpips" in r
        assert np.isfinite(r["diag/color_std"])  # the family's per-scene diagnostic, averaged
    assert evals[-1]["psnr"] > evals[0]["psnr"]  # it learns
    per_scene = json.load(open(os.path.join(toy_run["workdir"], "eval", "synthetic_step0000006.json")))["scenes"]
    assert len(per_scene) == 3
    np.testing.assert_allclose(np.mean([s["diag/color_std"] for s in per_scene]), evals[-1]["diag/color_std"],
                               rtol=1e-6)


def test_nonfinite_step_skipped(toy_run):
    ps = toy_run["per_step"]
    assert ps[5]["skipped"] == 1 and all(ps[s]["skipped"] == 0 for s in ps if s != 5)
    same = jax.tree_util.tree_map(np.array_equal, ps[4]["params"], ps[5]["params"])
    assert all(jax.tree_util.tree_leaves(same))
    changed = jax.tree_util.tree_map(np.array_equal, ps[5]["params"], ps[6]["params"])
    assert not all(jax.tree_util.tree_leaves(changed))
    assert int(toy_run["out"]["state"].num_nonfinite) == 1


def test_run_files(toy_run):
    wd = toy_run["workdir"]
    run = json.load(open(os.path.join(wd, "run.json")))
    for key in ("config", "num_params", "num_gaussians", "device_count", "device_kinds", "versions"):
        assert key in run
    assert run["num_gaussians"] == 32 and run["config"]["total_steps"] == TOTAL
    total = sum(x.size for x in jax.tree_util.tree_leaves(toy_run["out"]["state"].params))
    assert run["num_frozen_params"] == 3 and run["num_params"] == total - 3  # the toy's frozen offset
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(os.path.join(wd, "tensorboard")))
    pngs = sorted(os.listdir(os.path.join(wd, "samples")))
    assert len(pngs) == 3 and pngs[0].startswith("step0000000")
    from PIL import Image

    img = np.asarray(Image.open(os.path.join(wd, "samples", pngs[-1])))
    # rows: context, prediction, target, depth (2 views each), after a 66 px column of row labels
    assert img.shape == (4 * 16, 66 + 2 * 16, 3)
    assert sorted(os.listdir(os.path.join(wd, "eval")))[:2] == ["synthetic_step0000000.csv",
                                                                 "synthetic_step0000000.json"]
    assert sorted(int(s) for s in os.listdir(os.path.join(wd, "checkpoints")) if s.isdigit())[-1] == TOTAL


def test_rerun_resumes_and_refuses_other_config(toy_run):
    wd, config = toy_run["workdir"], toy_run["config"]
    out = train_and_evaluate(config, wd, model=toy_model(config), data=toy_data())  # already done
    assert out["step"] == TOTAL
    for a, b in zip(jax.tree_util.tree_leaves(out["state"].params),
                    jax.tree_util.tree_leaves(toy_run["out"]["state"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = toy_config(total_steps=TOTAL, eval_every=3, checkpoint_every=2)
    other.optimizer.learning_rate = 1e-3
    with pytest.raises(ConfigMismatchError, match="optimizer.learning_rate"):
        train_and_evaluate(other, wd, model=toy_model(other), data=toy_data())


def test_evaluate_checkpoint_exports_ply(toy_run):
    from locojax.io.ply import read_ply
    from locojax.train.eval_run import evaluate_checkpoint

    config = toy_run["config"]
    out = evaluate_checkpoint(config, toy_run["workdir"], step=3, export_ply=["toy001"],
                              model=toy_model(config), data=toy_data(), verbose=False)
    assert [r["scene"] for r in out["results"]] == ["toy000", "toy001", "toy002"]  # padding dropped
    logged = [r for r in _records(toy_run["workdir"]) if r.get("split") == "test" and r["step"] == 3][0]
    assert abs(out["summary"]["psnr"] - logged["psnr"]) < 1e-4  # same checkpoint, same numbers
    header = open(out["csv"]).readline().strip()
    assert header == "scene,psnr,ssim,lpips,num_gaussians,encoder_ms,diag/color_std"
    g = read_ply(out["ply"][0])
    assert g.means.shape == (32, 3) and g.sh.shape == (32, 1, 3)


def test_many_nonfinite_steps_stop_with_checkpoint_intact(tmp_path):
    config = toy_config(total_steps=10, eval_every=100, checkpoint_every=2, max_consecutive_nonfinite=3)
    config.model.nan_from_step = 3  # steps 4, 5, 6 (1-based) are non-finite
    with pytest.raises(NonFiniteError, match=r"3 consecutive steps.*last good checkpoint is step 4"):
        train_and_evaluate(config, str(tmp_path), model=toy_model(config), data=toy_data())
    steps = sorted(int(s) for s in os.listdir(tmp_path / "checkpoints") if s.isdigit())
    assert steps == [2, 4]


def test_bfloat16_compute_keeps_float32_params(tmp_path):
    config = toy_config(total_steps=2, eval_every=100, checkpoint_every=100, precision="bfloat16")
    seen = {}

    def hook(step, state, metrics):
        seen[step] = float(metrics["loss"])

    out = train_and_evaluate(config, str(tmp_path), model=toy_model(config), data=toy_data(), hooks=[hook])
    assert all(np.isfinite(v) for v in seen.values()) and len(seen) == 2
    assert {x.dtype for x in jax.tree_util.tree_leaves(out["state"].params)} == {np.dtype("float32")}


def test_paired_comparison_of_two_evaluations(toy_run, capsys):
    from locojax.train.compare import print_paired_comparison

    ev = os.path.join(toy_run["workdir"], "eval")
    table = print_paired_comparison(os.path.join(ev, "synthetic_step0000000.json"),
                                    os.path.join(ev, "synthetic_step0000006.json"))
    psnr_row = [ln for ln in table.splitlines() if ln.startswith("psnr")][0]
    assert " 3 " in psnr_row  # three paired scenes


def test_abstract_state_from_params_is_the_init_functions_abstract_state():
    import jax

    from locojax.train.run import build_run, placeholder_batch
    from locojax.train.state import abstract_state

    config = toy_config()
    run = build_run(config, placeholder_batch(config), toy_model(config))
    traced = abstract_state(run.init_fn, jax.random.PRNGKey(0), run.example_batch)
    assert jax.tree_util.tree_structure(run.abstract_state) == jax.tree_util.tree_structure(traced)
    for a, b in zip(jax.tree_util.tree_leaves(run.abstract_state), jax.tree_util.tree_leaves(traced)):
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
