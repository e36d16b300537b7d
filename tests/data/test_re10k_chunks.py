"""RealEstate10K/ACID chunk format -> TFDS -> load_scenes, read back exactly; bad input; rerun."""

import io
import json
import numpy as np
import pytest
from PIL import Image

from dp_helpers import camera_rows, small_scene, write_chunks
from data_pipelines import datasets, load_scenes


@pytest.fixture(scope="module")
def chunk_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("re10k_src")
    scenes = [small_scene(f"{i:016x}", i) for i in range(3)]
    # Scene 1 stored out of timestamp order: the reader must sort it.
    s = scenes[1]
    perm = np.random.default_rng(0).permutation(len(s["jpegs"]))
    s["jpegs"] = [s["jpegs"][i] for i in perm]
    s["timestamps"], s["intrinsics"], s["c2w"] = s["timestamps"][perm], s["intrinsics"][perm], s["c2w"][perm]
    write_chunks(root / "test", scenes, per_chunk=2)
    write_chunks(root / "train", [small_scene("aaaaaaaaaaaaaaaa", 7, split="train")])
    return root, scenes


@pytest.fixture(scope="module")
def built(chunk_source, tmp_path_factory):
    root, scenes = chunk_source
    out = tmp_path_factory.mktemp("re10k_out")
    builder = datasets.make_builder("re10k", str(out))
    datasets.ensure_built("re10k", builder, manual_dir=str(root))
    return out, scenes, builder


def test_read_back_exact(built):
    out, scenes, builder = built
    # Keys and frame counts are recorded at build time (no full scan needed to open a split).
    assert builder.info.metadata["keys_test"] == [s["key"] for s in scenes]
    assert builder.info.metadata["frames_test"] == [24, 24, 24]
    got = {s.key: s for s in load_scenes("re10k", "test", data_dir=str(out))}
    assert sorted(got) == sorted(s["key"] for s in scenes)
    for src in scenes:
        scene = got[src["key"]]
        order = np.argsort(src["timestamps"], kind="stable")
        np.testing.assert_array_equal(scene.timestamps, np.sort(src["timestamps"]))
        for k, i in enumerate(order):
            expected = np.asarray(Image.open(io.BytesIO(src["jpegs"][i])).convert("RGB"))
            np.testing.assert_array_equal(scene.images[k], expected)
        # Cameras: the stored w2c rows inverted back must give the source c2w (independent inverse).
        rows = camera_rows(src["intrinsics"], src["c2w"])[order].astype(np.float64)
        w2c = np.tile(np.eye(4), (len(rows), 1, 1))
        w2c[:, :3] = rows[:, 6:].reshape(-1, 3, 4)
        np.testing.assert_allclose(scene.c2w, np.linalg.inv(w2c), atol=1e-5)
        np.testing.assert_allclose(scene.c2w, src["c2w"][order], atol=1e-4)
        np.testing.assert_allclose(scene.intrinsics, src["intrinsics"][order], atol=1e-7)
        assert scene.images.shape[1:] == (36, 64, 3) and scene.images.dtype == np.uint8
        assert scene.c2w.dtype == np.float32 and scene.timestamps.dtype == np.int64


def test_records_in_chunk_order_and_found_by_key(built):
    """Records keep chunk order (= metadata keys_test); load_scenes(keys=[k]) returns scene k's frames."""
    out, scenes, builder = built
    data = builder.as_data_source("test")
    assert [data[i]["key"].decode("utf-8") for i in range(len(data))] == [s["key"] for s in scenes]
    for src in reversed(scenes):
        (scene,) = load_scenes("re10k", "test", data_dir=str(out), keys=[src["key"]])
        assert scene.key == src["key"]
        first = int(np.argmin(src["timestamps"]))
        expected = np.asarray(Image.open(io.BytesIO(src["jpegs"][first])).convert("RGB"))
        np.testing.assert_array_equal(scene.images[0], expected)


def test_bad_input_is_skipped_and_named(tmp_path):
    good = small_scene("good000000000000", 0, num_frames=4)
    non_jpeg = small_scene("nonjpeg000000000", 1, num_frames=4)
    non_jpeg["jpegs"][2] = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    bad_rows = small_scene("badrows000000000", 2, num_frames=4)
    bad_rows["cameras"] = camera_rows(bad_rows["intrinsics"], bad_rows["c2w"])[:, :17]
    stage = tmp_path / "src" / "test"
    write_chunks(stage, [good, non_jpeg, bad_rows], per_chunk=3)
    (stage / "000001.torch").write_bytes(b"this is not a torch file")
    index = json.loads((stage / "index.json").read_text())
    index["lostscene0000000"] = "000001.torch"
    (stage / "index.json").write_text(json.dumps(index))
    builder = datasets.make_builder("re10k", str(tmp_path / "out"))
    datasets.ensure_built("re10k", builder, manual_dir=str(tmp_path / "src"))
    skipped = builder.info.metadata["skipped"]
    reasons = {s["scene"]: (s["file"], s["reason"]) for s in skipped}
    assert set(reasons) == {"nonjpeg000000000", "badrows000000000", "lostscene0000000"}
    assert "frame 2 is not a JPEG" in reasons["nonjpeg000000000"][1]
    assert "18 values" in reasons["badrows000000000"][1] and reasons["badrows000000000"][0].endswith("000000.torch")
    assert "not a readable torch.save file" in reasons["lostscene0000000"][1]
    assert [s.key for s in load_scenes("re10k", "test", data_dir=str(tmp_path / "out"))] == ["good000000000000"]


def test_missing_folder_is_an_error(tmp_path):
    builder = datasets.make_builder("acid", str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="neither train/ nor test/"):
        datasets.ensure_built("acid", builder, manual_dir=str(tmp_path))
    (tmp_path / "test").mkdir()
    builder = datasets.make_builder("acid", str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="index.json"):
        datasets.ensure_built("acid", builder, manual_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="python -m data_pipelines.build acid"):
        list(load_scenes("acid", "test", data_dir=str(tmp_path / "out")))


class _Interrupted(Exception):
    pass


def _report(text: str) -> dict:
    return json.loads(text[text.rindex("\n{") + 1:] if "\n{" in text else text[text.index("{"):])


def test_interrupted_build_reruns_cleanly(chunk_source, tmp_path, monkeypatch, capsys):
    from data_pipelines import build
    from data_pipelines.builders import chunks

    root, _ = chunk_source
    out = tmp_path / "out"
    argv = ["re10k", f"--manual_dir={root}", f"--data_dir={out}"]
    original = chunks.LocojaxRe10k._generate_examples

    def dying(self, stage_dir, split):
        for n, item in enumerate(original(self, stage_dir, split)):
            if n == 1:
                raise _Interrupted("simulated interruption after one scene")
            yield item

    monkeypatch.setattr(chunks.LocojaxRe10k, "_generate_examples", dying)
    with pytest.raises(_Interrupted):
        build.main(argv)
    assert not datasets.is_prepared(datasets.make_builder("re10k", str(out)))  # nothing half-written
    monkeypatch.setattr(chunks.LocojaxRe10k, "_generate_examples", original)
    capsys.readouterr()
    assert build.main(argv) == 0
    report = _report(capsys.readouterr().out)
    assert report["splits"] == {"test": 3, "train": 1} and report["already_built"] is False
    info = out / "locojax_re10k" / str(chunks.LocojaxRe10k.VERSION) / "dataset_info.json"
    mtime = info.stat().st_mtime
    assert build.main(argv) == 0
    assert _report(capsys.readouterr().out)["already_built"] is True
    assert info.stat().st_mtime == mtime  # a finished dataset is not redone
    assert len(list(load_scenes("re10k", "test", data_dir=str(out)))) == 3
