"""globalsplat_tiny on the real (small) synthetic data, through the trainer and the entry points:
no recompilation across curriculum stages and evaluations, resume-by-rerun, refusal of a different
config, `experiments.evaluate --export_ply`, and the exported .ply rendering the same image."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.train.loop import train_and_evaluate

TOTAL = 6


def _overrides(data_dir):
    return [
        f"total_steps={TOTAL}", "log_every=1", "eval_every=3", "checkpoint_every=3",
        "model.stage_boundaries=(2,4,6)", "model.stage_ramp_steps=1",  # cross two curriculum stages
        "eval.lpips=false", "progress_bar=false",
        f"data.data_dir={data_dir}", "data.synthetic_num_train_scenes=4", "data.synthetic_num_test_scenes=2",
        "data.synthetic_image_size=32", "data.synthetic_num_frames=16", "data.image_shape=(32,32)",
        "model.num_latents=64", "model.gaussians_per_token=4",  # small and fast: the trainer is under test
    ]


def _cli(module, workdir, overrides, *extra, timeout=600):
    args = [sys.executable, "-m", module, "--config=globalsplat_tiny", f"--workdir={workdir}"]
    args += [f"--config.{o}" for o in overrides] + list(extra)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gs_tiny")
    overrides = _overrides(root / "data")
    config = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(config, overrides)
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, d, **kw: compiles.append(name) if name.endswith("backend_compile_duration") else None)
    counts = {}
    out = train_and_evaluate(config, str(root / "wd"), hooks=[lambda s, *a: counts.__setitem__(s, len(compiles))])
    return dict(workdir=root / "wd", overrides=overrides, config=config, out=out, counts=counts)


def test_no_recompilation_across_stages_and_evals(run):
    assert run["counts"][TOTAL] == run["counts"][1], run["counts"]
    recs = [json.loads(line) for line in open(run["workdir"] / "metrics.jsonl")]
    assert [r["step"] for r in recs if r.get("split") == "test"] == [0, 3, 6]
    train = [r for r in recs if "split" not in r]
    assert all(np.isfinite(r["loss"]) for r in train) and "loss/mse" in train[0]


def test_run_json(run):
    info = json.load(open(run["workdir"] / "run.json"))
    assert info["num_gaussians"] == 64 * 4 and info["num_params"] > 100_000
    assert info["config"]["model_family"] == "globalsplat"


def test_cli_rerun_resumes_and_other_config_refused(run):
    p = _cli("experiments.train", run["workdir"], run["overrides"])
    assert p.returncode == 0, p.stderr[-3000:]
    assert "step 6" in p.stdout or p.stdout == "" or "done" in p.stdout
    p = _cli("experiments.train", run["workdir"], run["overrides"] + ["optimizer.learning_rate=0.5"])
    assert p.returncode == 2 and "optimizer.learning_rate" in p.stderr and "cannot change" in p.stderr


def test_cli_evaluate_exports_ply_that_renders_the_same(run):
    from locojax.io.ply import read_ply
    from locojax.render import rasterize
    from locojax.train.step import cast_floats
    from locojax.geometry.cameras import cameras_from_views
    from data_pipelines import make_eval_iterator

    p = _cli("experiments.evaluate", run["workdir"], run["overrides"], "--step=3", "--export_ply")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "PSNR" in p.stdout and "mean" in p.stdout
    ply_dir = run["workdir"] / "ply" / "synthetic_step0000003"
    (ply_file,) = sorted(ply_dir.iterdir())
    res = json.load(open(run["workdir"] / "eval" / "synthetic_step0000003.json"))
    assert {r["scene"] for r in res["scenes"]} >= {ply_file.stem}
    # Independent path: predict the same scene with the checkpoint's params, render both.
    from locojax.train import checkpoint as ckpt
    from locojax.train.run import build_run, peek_batch
    from data_pipelines import make_train_iterator

    config = run["config"]
    r = build_run(config, peek_batch(make_train_iterator(config)))
    mgr = ckpt.make_manager(str(run["workdir"]), 3)
    state, _ = ckpt.restore(mgr, 3, r.abstract_state, r.state_shardings)
    for batch, keys in make_eval_iterator(config, protocol="synthetic"):
        if ply_file.stem in keys:
            i = keys.index(ply_file.stem)
            break
    model = r.model
    g = model.predict(state.params, jax.tree_util.tree_map(jnp.asarray, batch.context),
                      step=jnp.int32(3), train=False, rng=jax.random.PRNGKey(0)).gaussians
    g = cast_floats(g[i], jnp.float32)
    cam = jax.tree_util.tree_map(lambda x: x[i, 0], cameras_from_views(jax.tree_util.tree_map(jnp.asarray, batch.target)))
    h, w = batch.target.images.shape[2:4]
    draw = lambda gs: np.asarray(rasterize(gs, cam, width=w, height=h, sh_degree=model.sh_degree).rgb)  # noqa: E731
    back = jax.tree_util.tree_map(jnp.asarray, read_ply(str(ply_file)))
    assert back.means.shape == g.means.shape
    np.testing.assert_allclose(draw(back), draw(g), atol=2e-4)
