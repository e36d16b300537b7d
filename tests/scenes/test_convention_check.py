"""`python -m data_pipelines.check`: the convention check tells right cameras from flipped ones.

One synthetic scene is imported three ways: right (transforms.json with OpenGL poses, COLMAP with
OpenCV poses), and with its axes deliberately flipped (the OpenCV poses written into transforms.json
as they are, and OpenGL poses written into a COLMAP model: the commonest convention mistakes). The
epipolar error of SIFT matches must be far above the right scene's, and the COLMAP sparse points must
land on their observations only with the right poses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from scene_sources import GL_TO_CV, synthetic_scene, write_colmap, write_transforms


@pytest.fixture(scope="module")
def scene():
    return synthetic_scene(num_frames=6, size=128, stride=2)


def build_and_check(tmp_path, dataset, src, capsys):
    from data_pipelines.build import main as build
    from data_pipelines.check import main as check

    out = tmp_path / f"out_{src.parent.name}"
    assert build([dataset, f"--manual_dir={src}", f"--data_dir={out}"]) == 0
    capsys.readouterr()
    assert check([f"--data_dir={out}", f"--dataset={dataset}", "--scene=room"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    with Image.open(report["picture"]) as im:
        assert im.size[0] >= 256 and np.asarray(im).std() > 10
    return report


def test_flipped_axes_are_caught(tmp_path, scene, capsys):
    opencv = [np.asarray(c, np.float64) for c in scene["c2w"]]
    right_tf = build_and_check(tmp_path, "transforms", write_transforms(tmp_path / "right_tf" / "room", scene), capsys)
    flipped_tf = build_and_check(tmp_path, "transforms",
                                 write_transforms(tmp_path / "flip_tf" / "room", scene, c2w_gl=opencv), capsys)
    right_cm = build_and_check(tmp_path, "colmap", write_colmap(tmp_path / "right_cm" / "room", scene, True), capsys)
    flipped_cm = build_and_check(tmp_path, "colmap", write_colmap(tmp_path / "flip_cm" / "room", scene, True,
                                                                  c2w=[c @ GL_TO_CV for c in opencv]), capsys)
    assert right_tf["num_matches"] >= 50
    assert right_tf["epipolar_error_px"] < 0.5
    assert flipped_tf["epipolar_error_px"] > 10 * right_tf["epipolar_error_px"] and flipped_tf["epipolar_error_px"] > 2
    assert flipped_cm["epipolar_error_px"] > 10 * right_cm["epipolar_error_px"]
    assert right_cm["reprojection_error_px"] < 1e-3 and right_cm["fraction_behind_camera"] == 0
    assert flipped_cm["fraction_behind_camera"] == 1.0


def test_unknown_scene_is_one_line(tmp_path, scene, capsys):
    from data_pipelines.build import main as build
    from data_pipelines.check import main as check

    src = write_transforms(tmp_path / "src" / "room", scene)
    assert build(["transforms", f"--manual_dir={src}", f"--data_dir={tmp_path / 'out'}"]) == 0
    capsys.readouterr()
    assert check([f"--data_dir={tmp_path / 'out'}", "--dataset=transforms", "--scene=kitchen"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "kitchen" in err and "room" in err and "\n" not in err
