"""DL3DV (DepthSplat's chunk conversion of nerfstudio transforms) and ScanNet (FreeSplat layout)."""

import io

import numpy as np
import pytest
from PIL import Image

from dp_helpers import jpeg_bytes, small_scene, write_chunks
from data_pipelines import datasets, load_scenes

OPENGL_FROM_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])


def test_dl3dv_transforms_convention(tmp_path):
    """nerfstudio transform_matrix is an OpenGL c2w; DepthSplat stores inverse(T @ diag(1,-1,-1,1))
    as the w2c row: we must recover the OpenCV c2w = T @ diag(1,-1,-1,1)."""
    s = small_scene("0" * 64, 0, size=(27, 48), num_frames=6)
    c2w_cv = s["c2w"].astype(np.float64)
    transform_matrix = c2w_cv @ OPENGL_FROM_OPENCV  # what transforms.json would hold (OpenGL axes)
    stored_w2c = np.linalg.inv(transform_matrix @ OPENGL_FROM_OPENCV)
    rows = np.zeros((6, 18), np.float32)
    rows[:, :4] = np.stack([s["intrinsics"][:, 0, 0], s["intrinsics"][:, 1, 1], s["intrinsics"][:, 0, 2], s["intrinsics"][:, 1, 2]], -1)
    rows[:, 6:] = stored_w2c[:, :3].reshape(6, 12)
    s["cameras"] = rows
    write_chunks(tmp_path / "src" / "test", [s])
    builder = datasets.make_builder("dl3dv", str(tmp_path / "out"))
    datasets.ensure_built("dl3dv", builder, manual_dir=str(tmp_path / "src"))
    (scene,) = load_scenes("dl3dv", "test", data_dir=str(tmp_path / "out"))
    np.testing.assert_allclose(scene.c2w, c2w_cv, atol=1e-5)
    # OpenCV: camera z (third column) is the viewing direction, y points down in the image.
    assert scene.key == "0" * 64 and scene.images.shape == (6, 27, 48, 3)


def _write_scannet_scene(folder, s, depth_mm, intrinsic_px, bad_frame=None):
    (folder / "color").mkdir(parents=True)
    (folder / "depth").mkdir()
    (folder / "intrinsic").mkdir()
    for i, im in enumerate(s["images"]):
        data = jpeg_bytes(im)
        if i == bad_frame:
            data = b"GIF89a" + data[6:]
        (folder / "color" / f"{i}.jpg").write_bytes(data)
        Image.fromarray(depth_mm[i]).save(folder / "depth" / f"{i}.png")
    np.savetxt(folder / "intrinsic" / "intrinsic_color.txt", intrinsic_px)
    np.save(folder / "extrinsics.npy", s["c2w"].astype(np.float64))


def test_scannet_freesplat_layout(tmp_path):
    from data_pipelines.readers.scannet_freesplat import eval_key_to_scene

    src = tmp_path / "src"
    H, W = 30, 40
    good = small_scene("scene0001_00", 0, size=(H, W), num_frames=5)
    bad = small_scene("scene0002_00", 1, size=(H, W), num_frames=5)
    depth_mm = np.round(good["depth"] * 1000).astype(np.uint16)
    K_px = np.eye(4)
    K_px[0, 0], K_px[1, 1] = good["intrinsics"][0, 0, 0] * W, good["intrinsics"][0, 1, 1] * H
    K_px[0, 2], K_px[1, 2] = good["intrinsics"][0, 0, 2] * W, good["intrinsics"][0, 1, 2] * H
    _write_scannet_scene(src / "test" / "scene0001_00", good, depth_mm, K_px)
    _write_scannet_scene(src / "test" / "scene0002_00", bad, depth_mm, K_px, bad_frame=3)
    builder = datasets.make_builder("scannet", str(tmp_path / "out"))
    datasets.ensure_built("scannet", builder, manual_dir=str(src))
    skipped = builder.info.metadata["skipped"]
    assert len(skipped) == 1 and skipped[0]["scene"] == "scene0002_00" and "color/3.jpg" in skipped[0]["reason"]
    (scene,) = load_scenes("scannet", "test", data_dir=str(tmp_path / "out"))
    assert scene.key == "scene0001_00"
    np.testing.assert_allclose(scene.c2w, good["c2w"], atol=1e-6)
    np.testing.assert_allclose(scene.intrinsics, good["intrinsics"], atol=1e-6)
    np.testing.assert_allclose(scene.depth, depth_mm / 1000.0, atol=1e-6)
    first = np.asarray(Image.open(io.BytesIO((src / "test" / "scene0001_00" / "color" / "0.jpg").read_bytes())).convert("RGB"))
    np.testing.assert_array_equal(scene.images[0], first)
    assert eval_key_to_scene("scene0553_00_0") == "scene0553_00"


def test_scannet_missing_stage_folder(tmp_path):
    builder = datasets.make_builder("scannet", str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        datasets.ensure_built("scannet", builder, manual_dir=str(tmp_path / "nope"))
