"""`python -m experiments.predict` on an imported scene with the tiny trained run (tests/conftest.py):
context nearest in pose to the middle frame by default, an INRIA .ply that renders back to the scored
held-out PSNR, a video along the camera path, explicit --context, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scene_sources import synthetic_scene, write_transforms


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from data_pipelines.build import main as build

    root = tmp_path_factory.mktemp("predict_scene")
    scene = synthetic_scene(num_frames=7, size=64, stride=2)
    src = write_transforms(root / "src" / "room", scene)
    assert build(["transforms", f"--manual_dir={src}", f"--data_dir={root / 'out'}"]) == 0
    return dict(data_dir=root / "out", scene=scene)


@pytest.mark.long_running
def test_predict_on_an_imported_scene(tiny_run, imported, tmp_path, capsys):
    from experiments.predict import main
    from locojax.io.ply import read_ply
    from locojax.io.video import read_video
    from locojax.train.predict_scene import load_predictor, pose_distance

    out = tmp_path / "pred"
    args = [f"--workdir={tiny_run['workdir']}", f"--data_dir={imported['data_dir']}", "--scene=room",
            f"--out={out}", "--frames=5"]
    assert main(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    c2w = imported["scene"]["c2w"]
    d = pose_distance(c2w, 3)
    d[3] = np.inf
    assert m["context"] == sorted(np.argsort(d)[:2].tolist()) and 3 in m["held_out"]
    assert m["held_out"] == [i for i in range(7) if i not in m["context"]]
    assert m["dataset"] == "transforms" and m["image_shape"] == [32, 32]
    assert np.isfinite(m["psnr"]) and len(m["per_frame"]) == 5

    g = read_ply(str(out / "gaussians.ply"))
    assert g.means.shape[0] == m["num_gaussians"] > 0
    predictor = load_predictor(str(tiny_run["workdir"]))
    from locojax.train.predict_scene import find_scene, scene_views

    ref = find_scene(str(imported["data_dir"]), "room")
    frame = m["per_frame"][0]["frame"]
    target = scene_views(ref, [frame], (32, 32), predictor.near, predictor.far)
    import jax

    g1 = jax.tree_util.tree_map(lambda x: np.asarray(x)[None], g)
    rgb = np.clip(predictor.render(g1, target.c2w[0, 0], target.intrinsics[0, 0])[0], 0, 1)
    mse = float(np.mean((rgb.astype(np.float64) - target.images[0, 0]) ** 2))
    assert -10 * np.log10(mse) == pytest.approx(m["per_frame"][0]["psnr"], abs=2e-3)

    video = read_video(str(out / "interpolate.mp4"))
    assert video.shape == (5, 32, 64, 3) and video.std() > 1

    assert main(args + ["--context=0,6", f"--out={tmp_path / 'pred2'}"]) == 0
    m2 = json.loads((tmp_path / "pred2" / "metrics.json").read_text())
    assert m2["context"] == [0, 6] and m2["held_out"] == [1, 2, 3, 4, 5]

    capsys.readouterr()
    assert main(args[:2] + ["--scene=kitchen"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "kitchen" in err and "room (transforms)" in err and "\n" not in err
    assert main(args + ["--context=0,9"]) == 2
    assert "--context=0,9" in capsys.readouterr().err
