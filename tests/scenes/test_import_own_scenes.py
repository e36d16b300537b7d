"""`python -m data_pipelines.build colmap|transforms`: a COLMAP model written with pycolmap (text and
binary) and a nerfstudio transforms.json, all made from one synthetic scene, import to scenes whose
cameras match the originals to 1e-5 and whose images match exactly; distorted cameras are undistorted
consistently with their sparse points; bad input is one line naming the file and the image, and
leaves every dataset already built untouched."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from scene_sources import synthetic_scene, write_colmap, write_transforms


@pytest.fixture(scope="module")
def scene():
    return synthetic_scene()


def build(dataset, src, out, *extra):
    from data_pipelines.build import main

    return main([dataset, f"--manual_dir={src}", f"--data_dir={out}", *extra])


def imported(dataset, out):
    from data_pipelines.loading import load_scenes

    return list(load_scenes(dataset, "test", data_dir=str(out)))


def error_line(stderr: str) -> str:
    """The one error line (after TFDS's progress bars, which end without a newline)."""
    assert stderr.count("error: ") == 1, stderr
    line = stderr.split("error: ", 1)[1]
    assert line.strip().count("\n") == 0, line
    return line


def tree_digest(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", ["colmap_text", "colmap_binary", "transforms"])
def test_import_matches_the_synthetic_scene(tmp_path, scene, fmt):
    src = tmp_path / "src" / "room"
    if fmt == "transforms":
        write_transforms(src, scene)
    else:
        write_colmap(src, scene, binary=(fmt == "colmap_binary"))
        assert (src / "sparse" / "0" / ("cameras.bin" if fmt == "colmap_binary" else "cameras.txt")).is_file()
    dataset = fmt.split("_")[0]
    assert build(dataset, src, tmp_path / "out") == 0
    (got,) = imported(dataset, tmp_path / "out")
    assert got.key == "room"
    np.testing.assert_array_equal(got.images, scene["images"])
    np.testing.assert_allclose(got.c2w, scene["c2w"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got.intrinsics, scene["intrinsics"], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(got.timestamps, np.arange(len(scene["images"])))


def test_a_folder_of_scenes_and_normalisation_recorded(tmp_path, scene):
    from data_pipelines import datasets

    other = synthetic_scene(index=1, num_frames=3)
    write_colmap(tmp_path / "src" / "b_room", scene, binary=True)
    write_colmap(tmp_path / "src" / "a_room", other, binary=False)
    assert build("colmap", tmp_path / "src", tmp_path / "out", "--normalize=cameras") == 0
    got = imported("colmap", tmp_path / "out")
    assert [s.key for s in got] == ["a_room", "b_room"]
    builder = datasets.make_builder("colmap", str(tmp_path / "out"))
    norm = builder.info.metadata["scenes"]["b_room"]["normalization"]
    centres = scene["c2w"][:, :3, 3].astype(np.float64)
    np.testing.assert_allclose(norm["centre"], centres.mean(0), atol=1e-6)
    np.testing.assert_allclose(got[1].c2w[:, :3, 3], (centres - centres.mean(0)) * norm["scale"], atol=1e-5)
    assert np.linalg.norm(got[1].c2w[:, :3, 3], axis=-1).max() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(got[1].c2w[:, :3, :3], scene["c2w"][:, :3, :3], atol=1e-6)


def test_distorted_camera_is_undistorted_consistently(tmp_path, scene):
    """A SIMPLE_RADIAL camera whose observations are the distorted projections of the sparse points:
    after COLMAP's undistortion the imported pinhole cameras reproject the points onto their
    undistorted observations (sub-pixel), and the frames are pinhole images of the undistorted size."""
    import pycolmap

    from data_pipelines.check import reprojection_errors
    from data_pipelines import datasets
    from data_pipelines.readers.posed_images import SparsePoints

    n, h, w = scene["images"].shape[:3]
    K = scene["intrinsics"][0] * np.array([[w], [h], [1.0]])
    params = [K[0, 0], K[0, 2], K[1, 2], -0.08]
    src = write_colmap(tmp_path / "src" / "room", scene, binary=True, model="SIMPLE_RADIAL", params=params)
    # Re-project each observation through the distortion model (the writer wrote pinhole pixels).
    model_dir = src / "sparse" / "0"
    rec = pycolmap.Reconstruction(str(model_dir))
    cam = rec.cameras[1]
    for image in rec.images.values():
        for p2 in image.points2D:
            if p2.has_point3D():
                xyz = rec.points3D[p2.point3D_id].xyz
                pc = image.cam_from_world() * xyz
                p2.xy = cam.img_from_cam(pc)
    rec.write_binary(str(model_dir))
    assert build("colmap", src, tmp_path / "out") == 0
    (got,) = imported("colmap", tmp_path / "out")
    meta = datasets.make_builder("colmap", str(tmp_path / "out")).info.metadata["scenes"]["room"]
    points = SparsePoints.from_json(meta["points"])
    assert len(points.observations) > 100
    err = reprojection_errors(got.c2w, got.intrinsics, got.images.shape[2], got.images.shape[1], points)
    assert np.median(err) < 0.05 and err.max() < 0.5, (np.median(err), err.max())
    assert got.intrinsics[0, 0, 1] == 0 and got.images.shape[0] == n
    np.testing.assert_allclose(got.c2w, scene["c2w"], atol=1e-5)


def _missing_image(src):
    (src / "images" / "frame_002.png").unlink()
    return "frame_002.png"


def _unknown_model(src):
    path = src / "sparse" / "0" / "cameras.txt"
    path.write_text(re.sub(r"^1 PINHOLE", "1 PINHOLE_WITH_FISH", path.read_text(), flags=re.M))
    return "camera 1"


def _nan_pose(src):
    path = src / "sparse" / "0" / "images.txt"
    lines = path.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.endswith("frame_004.png"))
    fields = lines[i].split()
    fields[5] = "nan"
    lines[i] = " ".join(fields)
    path.write_text("\n".join(lines) + "\n")
    return "frame_004.png"


@pytest.mark.parametrize("case", ["missing_image", "unknown_model", "nan_pose", "single_image", "nan_transforms"])
def test_bad_input_is_one_line_and_touches_nothing(tmp_path, scene, capsys, case):
    # An import already built in OUT must survive any failed build next to it, byte for byte.
    good = write_transforms(tmp_path / "good" / "room", scene) if case != "nan_transforms" else \
        write_colmap(tmp_path / "good" / "room", scene, binary=True)
    good_dataset = "transforms" if case != "nan_transforms" else "colmap"
    assert build(good_dataset, good, tmp_path / "out") == 0
    before = tree_digest(tmp_path / "out")
    capsys.readouterr()

    src = tmp_path / "bad" / "room"
    dataset = "colmap"
    if case == "single_image":
        write_colmap(src, {k: (v[:1] if isinstance(v, np.ndarray) else v) for k, v in scene.items()}, binary=False)
        named, file = "frame_000.png", "images.txt"
    elif case == "nan_transforms":
        poses = [np.asarray(c, np.float64) for c in scene["c2w"]]
        poses[3] = poses[3] * np.nan
        write_transforms(src, scene, c2w_gl=poses)
        named, file, dataset = "images/frame_003.png", "transforms.json", "transforms"
    else:
        write_colmap(src, scene, binary=False)
        named = {"missing_image": _missing_image, "unknown_model": _unknown_model, "nan_pose": _nan_pose}[case](src)
        file = "cameras.txt" if case == "unknown_model" else "images.txt"
    assert build(dataset, src, tmp_path / "out") == 1
    err = error_line(capsys.readouterr().err)
    assert named in err and file in err, err
    assert tree_digest(tmp_path / "out") == before
    assert not (tmp_path / "out" / f"locojax_{dataset}").exists() or dataset == good_dataset
    assert build(dataset, src, tmp_path / "fresh") == 1
    assert not (tmp_path / "fresh").exists()  # a failed import into a new --data_dir leaves nothing


def test_existing_import_is_never_replaced_by_another_source(tmp_path, scene, capsys):
    write_colmap(tmp_path / "a" / "room", scene, binary=True)
    write_colmap(tmp_path / "b" / "room", scene, binary=False)
    assert build("colmap", tmp_path / "a" / "room", tmp_path / "out") == 0
    before = tree_digest(tmp_path / "out")
    capsys.readouterr()
    assert build("colmap", tmp_path / "b" / "room", tmp_path / "out") == 1
    err = error_line(capsys.readouterr().err)
    assert "already holds" in err and str(tmp_path / "a" / "room") in err
    assert tree_digest(tmp_path / "out") == before
    assert build("colmap", tmp_path / "a" / "room", tmp_path / "out") == 0  # same source: already built
