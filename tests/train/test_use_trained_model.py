"""Using a trained run (the session's `tiny_run`): novel-view videos, labelled sample sheets, and
corrupt checkpoints that explain themselves (evaluate/render name the step; resume falls back)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil

import numpy as np
import pytest
from PIL import Image


def _snapshot(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(root).rglob("*")) if p.is_file()}


def _corrupt(workdir, step: int) -> dict:
    """Truncate every array chunk of checkpoint `step`; returns the snapshot of that checkpoint."""
    ckpt = pathlib.Path(workdir) / "checkpoints" / str(step)
    chunks = [p for p in ckpt.rglob("*") if p.is_file() and p.parent.name == "d"]
    assert chunks
    for p in chunks:
        p.write_bytes(p.read_bytes()[:100])
    return _snapshot(ckpt)


def test_render_writes_playable_video(tiny_run):
    from experiments import render
    from locojax.io.video import read_video

    wd = tiny_run["workdir"]
    assert render.main([f"--workdir={wd}", "--frames=8", "--path=orbit", "--fps=8"]) == 0
    mp4 = sorted((wd / "videos").glob("*_orbit_step0000002.mp4"))
    gif = sorted((wd / "videos").glob("*_orbit_step0000002.gif"))
    assert len(mp4) == 1 and len(gif) == 1
    video = read_video(str(mp4[0]))
    h, w = tiny_run["config"].data.image_shape
    assert video.shape == (8, h, 2 * w, 3)  # RGB | depth side by side
    assert video.astype(np.float32).std(axis=0).mean() > 1.0  # the camera moves: frames differ
    rgb, depth = video[..., :w, :], video[..., w:, :]
    assert rgb.std() > 1.0 and depth.std() > 1.0
    with Image.open(gif[0]) as im:
        assert im.n_frames == 8 and im.size == (2 * w, h)


def test_render_unknown_scene_is_one_line(tiny_run, capsys):
    from experiments import render

    assert render.main([f"--workdir={tiny_run['workdir']}", "--scene=nope", "--frames=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --scene='nope' is not in protocol") and "synthetic_test_00000" in err[-1]


def test_sample_sheets_have_labelled_rows(tiny_run):
    pngs = sorted((tiny_run["workdir"] / "samples").glob("step0000002_*.png"))
    assert pngs
    sheet = np.asarray(Image.open(pngs[0]))
    h = tiny_run["config"].data.image_shape[0]
    assert sheet.shape[0] == 4 * h  # context / prediction / target / depth
    for row in range(4):  # white label text in the left column of every row
        assert (sheet[row * h:(row + 1) * h, :60] > 200).all(axis=-1).any(), row


def test_corrupt_checkpoint_named_by_render_and_evaluate(tiny_run, tmp_path, capfd):
    from experiments import render
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.eval_run import evaluate_checkpoint

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run["workdir"], wd)
    _corrupt(wd, 2)
    before = _snapshot(wd)
    capfd.readouterr()
    assert render.main([f"--workdir={wd}", "--frames=2", "--no_gif"]) == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Event loop is closed" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    assert errors[0].startswith(f"error: checkpoint step 2 ({wd}/checkpoints/2) cannot be read: ")
    assert errors[0].endswith("earlier checkpoints: 1 (e.g. --step=1)")
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint step 2 .* --step=1"):
        evaluate_checkpoint(tiny_run["config"], str(wd), verbose=False)
    assert _snapshot(wd) == before  # nothing written, nothing moved


def test_resume_moves_corrupt_checkpoint_aside_and_falls_back(tiny_run, tmp_path, capsys):
    from locojax.train.loop import train_and_evaluate

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run["workdir"], wd)
    corrupt = _corrupt(wd, 2)
    out = train_and_evaluate(tiny_run["config"], str(wd))
    text = capsys.readouterr().out
    warning = [line for line in text.splitlines() if line.startswith("warning: checkpoint step 2")]
    assert len(warning) == 1 and warning[0].endswith(
        f"Moved it to {wd}/checkpoints_corrupt/2; resuming from the previous checkpoint."), text
    assert _snapshot(wd / "checkpoints_corrupt" / "2") == corrupt  # kept byte for byte
    assert out["step"] == 2 and sorted(os.listdir(wd / "checkpoints")) == ["1", "2"]


def test_resume_moves_nothing_when_no_checkpoint_restores(tiny_run, tmp_path):
    """A model whose structure differs from the checkpoints' (as after a code change) fails on every
    step: that is no damaged file, so nothing is moved aside and the error says so."""
    import configs
    from locojax.models.registry import build_model
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.loop import train_and_evaluate

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run["workdir"], wd)
    before = _snapshot(wd)
    other = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(other, tiny_run["overrides"] + ["model.dim_rays=16"])
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint step 2 .* none of the 2 checkpoints .* none was moved"):
        train_and_evaluate(tiny_run["config"], str(wd), model=build_model(other))
    assert not (wd / "checkpoints_corrupt").exists()
    assert _snapshot(wd) == before
