"""Built datasets store records in the order of their metadata keys (keys_<split>), and SceneSource
refuses a build where they differ. TFDS 4.9 shuffles records unless DatasetInfo(disable_shuffling=True);
builder version 1.0.0 set only a class attribute, which TFDS ignores (docs/data.md)."""

import numpy as np
import pytest

from dp_helpers import tiny_config
from data_pipelines import datasets, load_scenes
from data_pipelines.errors import RecordOrderError
from data_pipelines.storage import SceneSource
from data_pipelines.synthetic.generate import sample_scene, scene_key


def _stored_keys(builder, split):
    """Each record's own key field, read straight from the TFDS data source (no SceneSource checks)."""
    source = builder.as_data_source(split)
    return [source[i]["key"].decode("utf-8") for i in range(len(source))]


@pytest.mark.parametrize("split", ["train", "test"])
def test_synthetic_records_in_metadata_order(synthetic_dir, split):
    cfg = tiny_config(synthetic_dir)
    builder = datasets.make_builder("synthetic", str(synthetic_dir), config=cfg)
    count = cfg.data.synthetic_num_train_scenes if split == "train" else cfg.data.synthetic_num_test_scenes
    generation_order = [scene_key(split, i) for i in range(count)]
    assert list(builder.info.metadata[f"keys_{split}"]) == generation_order
    assert _stored_keys(builder, split) == generation_order


@pytest.mark.parametrize("split", ["train", "test"])
def test_load_scenes_by_key_returns_that_scene(synthetic_dir, split):
    cfg = tiny_config(synthetic_dir)
    count = cfg.data.synthetic_num_train_scenes if split == "train" else cfg.data.synthetic_num_test_scenes
    for i in reversed(range(count)):
        key = scene_key(split, i)
        (scene,) = load_scenes("synthetic", split, config=cfg, keys=[key], with_depth=False)
        assert scene.key == key
        # Content, not only the key field: the cameras the generator samples for scene i (no rendering).
        _, c2w, _ = sample_scene(0, split, i, cfg.data.synthetic_num_frames)
        np.testing.assert_allclose(scene.c2w, c2w.astype(np.float32), atol=1e-6)


def test_misordered_build_is_refused_in_one_line(synthetic_dir):
    builder = datasets.make_builder("synthetic", str(synthetic_dir), config=tiny_config(synthetic_dir))
    keys = list(builder.info.metadata["keys_train"])
    builder.info.metadata["keys_train"] = keys[1:] + keys[:1]  # what a shuffled build's metadata looks like
    try:
        with pytest.raises(RecordOrderError) as e:
            SceneSource(builder, "train")
    finally:
        builder.info.metadata["keys_train"] = keys
    msg = str(e.value)
    assert "\n" not in msg and str(builder.data_dir) in msg
    assert f"record 0 of split 'train' holds scene {keys[0]!r}" in msg and f"lists {keys[1]!r}" in msg
    assert "rerun (the synthetic dataset rebuilds itself)" in msg


def test_not_built_names_an_older_build(tmp_path):
    """A chunk dataset built by version 1.0.0 is not read; the not-built error points at it."""
    from data_pipelines.builders.chunks import LocojaxRe10k
    from data_pipelines.errors import DatasetNotBuiltError

    old = tmp_path / "locojax_re10k" / "1.0.0"
    old.mkdir(parents=True)
    (old / "dataset_info.json").write_text("{}")
    builder = datasets.make_builder("re10k", str(tmp_path))
    assert str(LocojaxRe10k.VERSION) != "1.0.0"
    with pytest.raises(DatasetNotBuiltError, match=r"older builds there: 1\.0\.0: not used, see docs/data\.md"):
        datasets.ensure_built("re10k", builder)
