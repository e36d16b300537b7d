"""`experiments.import_weights` on the official GlobalSplat fixture state_dict (a torch .pth made from
tests/fixtures/globalsplat/globalsplat_tiny_weights.npz): the checkpoint holds exactly the converted
weights, and evaluate, render and `train --init_from` use it."""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np
import pytest

import configs

# The fixture network: globalsplat_tiny widths with 64 latents, SH degree 3 and the official 4 rounds x 2
# self-attention layers.
FIXTURE_MODEL = ("model.num_latents=64", "model.sh_degree=3", "model.rounds=4", "model.self_attention_per_round=2",
                 "model.gaussians_per_token=8")


@pytest.fixture(scope="module")
def imported(tiny_run, tmp_path_factory, fixtures_dir):
    torch = pytest.importorskip("torch")
    from experiments import import_weights

    root = tmp_path_factory.mktemp("imported")
    weights = dict(np.load(fixtures_dir / "globalsplat" / "globalsplat_tiny_weights.npz"))
    pth = root / "globalsplat_tiny.pth"
    torch.save({"model": {k: torch.from_numpy(v.astype(np.float32)) for k, v in weights.items()}}, pth)
    overrides = [o for o in tiny_run["overrides"] if o.split("=")[0].startswith(("data.", "eval."))]
    overrides += list(FIXTURE_MODEL)
    argv = ["--family=globalsplat", f"--from={pth}", f"--workdir={root / 'wd'}", "--config=globalsplat_tiny"]
    assert import_weights.main(argv + [f"--config.{o}" for o in overrides]) == 0
    config = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(config, overrides)
    return dict(workdir=root / "wd", weights=weights, config=config, pth=pth, overrides=overrides)


def _snapshot(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(root).rglob("*")) if p.is_file()}


def test_checkpoint_holds_the_converted_weights(imported):
    from flax import traverse_util

    from locojax.train import checkpoint as ckpt
    from locojax.models.globalsplat.convert import import_weights

    manager = ckpt.make_manager(str(imported["workdir"]), 3, async_save=False)
    assert list(manager.all_steps()) == [0]
    saved = traverse_util.flatten_dict(ckpt.restore_raw_params(manager, 0))
    want = traverse_util.flatten_dict(import_weights(imported["weights"], imported["config"]))
    assert set(saved) == set(want)
    for k in want:
        np.testing.assert_array_equal(saved[k], want[k])
    # e.g. a torch Linear [out, in] became a Flax kernel [in, out]
    key = "gaussian_decoder.sh_head.weight"
    if key in imported["weights"]:
        np.testing.assert_array_equal(saved[("gaussian_decoder", "sh_head", "kernel")],
                                      imported["weights"][key].astype(np.float32).T)


def test_render_uses_it(imported):
    from experiments import render
    from locojax.io.video import read_video

    assert render.main([f"--workdir={imported['workdir']}", "--frames=3", "--no_gif"]) == 0
    (mp4,) = (imported["workdir"] / "videos").glob("*_orbit_step0000000.mp4")
    h, w = imported["config"].data.image_shape
    video = read_video(str(mp4))
    assert video.shape == (3, h, 2 * w, 3) and video.std() > 1.0


def test_evaluate_and_init_from_use_it(imported, tmp_path):
    from locojax.train.eval_run import evaluate_checkpoint
    from locojax.train.loop import train_and_evaluate

    ev = evaluate_checkpoint(imported["config"], str(imported["workdir"]), verbose=False)
    assert ev["step"] == 0 and np.isfinite(ev["summary"]["psnr"])
    # A fresh run started from the imported params: its step-0 evaluation scores exactly those params.
    config = imported["config"].copy_and_resolve_references()
    config.total_steps = 0
    train_and_evaluate(config, str(tmp_path / "ft"), init_from=str(imported["workdir"]))
    recs = [json.loads(line) for line in open(tmp_path / "ft" / "metrics.jsonl")]
    step0 = [r for r in recs if r.get("split") == "test" and r["step"] == 0]
    assert step0 and step0[0]["psnr"] == pytest.approx(ev["summary"]["psnr"], abs=1e-5)


def test_bad_inputs_are_one_line(imported, tmp_path, capsys):
    from experiments import import_weights

    base = [f"--workdir={tmp_path / 'x'}", "--config=globalsplat_tiny"]
    assert import_weights.main(["--family=globalsplat", f"--from={tmp_path / 'missing.pth'}"] + base) == 2
    assert capsys.readouterr().err.strip().endswith("missing.pth: no such file")
    assert import_weights.main(["--family=nosuch", f"--from={imported['pth']}"] + base) == 2
    assert capsys.readouterr().err.strip() == "error: --family=nosuch but the config's model_family is 'globalsplat'"
    # the 16k preset does not fit the tiny weights: the converter names the mismatching keys
    assert import_weights.main(["--family=globalsplat", f"--from={imported['pth']}",
                                f"--workdir={tmp_path / 'y'}", "--config=globalsplat_16k"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not match the model config" in err[0]
    assert not (tmp_path / "x").exists() and not (tmp_path / "y" / "checkpoints").exists()
    # importing into a run that has checkpoints is refused, and the run is left as it was
    before = _snapshot(imported["workdir"])
    assert import_weights.main(["--family=globalsplat", f"--from={imported['pth']}",
                                f"--workdir={imported['workdir']}", "--config=globalsplat_tiny"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: --workdir={imported['workdir']} already holds checkpoints; "
                                               "import into a new directory")
    assert _snapshot(imported["workdir"]) == before


def test_init_from_that_does_not_fit_is_one_line(imported, tiny_run, tmp_path, capsys):
    """`train --init_from`: a missing run, or weights of another model shape (the imported fixture
    network has 4 rounds, the tiny run's model fewer), fail in setup: one line, nothing written."""
    from experiments import train

    argv = ["--config=globalsplat_tiny", f"--workdir={tmp_path / 'wd'}"] + [f"--config.{o}" for o in tiny_run["overrides"]]
    assert train.main(argv + [f"--init_from={tmp_path / 'nothing'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: --init_from={tmp_path / 'nothing'}: no checkpoints/ there"]
    assert train.main(argv + [f"--init_from={imported['workdir']}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --init_from={imported['workdir']} (step 0): params do not fit the model")
    assert not (tmp_path / "wd").exists()
