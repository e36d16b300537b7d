"""The dataset registry (`data_pipelines/registry.py`) and the typed data config
(`config.DataConfig`): every spec resolves to a TFDS builder named after its dataset, the
datasets keep the planes and resizes they had before the registry, `DataConfig.parse` reads every
preset exactly as `data_value` does key by key, and a misspelt `config.data` key is refused in one
line naming it and the key that was meant, before anything is built."""

from __future__ import annotations

import dataclasses

import pytest

import configs
from data_pipelines import datasets, make_train_iterator, registry
from data_pipelines.config import DataConfig, data_value, default_data_config
from data_pipelines.errors import UnknownDataKeyError, UnknownDatasetError


def test_specs_resolve_to_builders_named_after_their_dataset(tmp_path):
    import tensorflow_datasets as tfds

    for name, spec in registry.DATASET_SPECS.items():
        builder = datasets.make_builder(name, str(tmp_path))
        assert isinstance(builder, spec.builder_class()) and isinstance(builder, tfds.core.DatasetBuilder)
        assert builder.name == f"locojax_{name}"  # storage.SceneSource names the dataset from it
        assert str(builder.data_dir).startswith(str(tmp_path))
        assert set(spec.sampler_views) <= set(registry.SAMPLERS), name
    assert registry.DATASET_SPECS["scannet"].eval_key_function()("scene0000_01_2") == "scene0000_01"
    assert {n for n, s in registry.DATASET_SPECS.items() if s.eval_key} == {"scannet"}
    with pytest.raises(UnknownDatasetError, match="config.dataset='imagenet': unknown dataset; expected one of "
                                                  "synthetic, re10k, acid, dl3dv, scannet, colmap, transforms$"):
        registry.spec("imagenet")


def test_dataset_settings_unchanged_by_the_registry(tmp_path):
    # The tables the registry replaced (datasets.NEAR_FAR / PRE_RESIZE, the make_builder if-chain,
    # predict_scene's search order: users' imports first), as they were.
    assert datasets.NEAR_FAR == {"synthetic": (0.5, 15.0), "re10k": (1.0, 100.0), "acid": (1.0, 100.0),
                                 "dl3dv": (1.0, 100.0), "scannet": (0.5, 15.0), "colmap": (0.5, 100.0),
                                 "transforms": (0.5, 100.0)}
    assert datasets.PRE_RESIZE == {"scannet": (480, 640)}
    assert registry.SEARCH_ORDER == ("colmap", "transforms", "re10k", "acid", "dl3dv", "scannet", "synthetic")
    data = DataConfig.parse({"data": {"synthetic_num_train_scenes": 3, "synthetic_num_test_scenes": 1,
                                      "synthetic_image_size": 32, "synthetic_num_frames": 8, "build_workers": 5}})
    builder = datasets.make_builder("synthetic", str(tmp_path), config=data)
    assert builder.builder_config.name == "n3-1_32x32_f8_s0" and builder._num_workers == 2
    assert datasets.make_builder("colmap", str(tmp_path), normalize="cameras")._normalize == "cameras"
    assert datasets.near_far("re10k", {"data": {"near": 0.5}}) == (0.5, 100.0)


def test_data_config_parses_every_preset_as_data_value_reads_it():
    keys = [f.name for f in dataclasses.fields(DataConfig)]
    assert sorted(keys[3:]) == sorted(default_data_config().keys()) and keys[:3] == ["dataset", "batch_size", "seed"]
    for name in configs.config_names():
        config = configs.get_config(name)
        data = DataConfig.parse(config)
        assert DataConfig.parse(data) is data
        assert (data.dataset, data.batch_size, data.seed) == (config.dataset, config.batch_size, config.seed)
        for key in keys[3:]:
            want = data_value(config, key)
            assert getattr(data, key) == (tuple(want) if key == "image_shape" else want), (name, key)
    assert DataConfig.parse(None) == DataConfig.parse({"data": {}}) == DataConfig.parse({"data": None})
    assert DataConfig.parse(None).dataset == "synthetic"


def test_misspelt_data_key_is_one_line_naming_it(tmp_path):
    config = {"dataset": "synthetic", "batch_size": 1, "data": {"data_dir": str(tmp_path / "data"), "sampeler": "tokengs"}}
    with pytest.raises(UnknownDataKeyError) as e:
        make_train_iterator(config)
    assert str(e.value) == "config.data.sampeler is not a data_pipelines key; did you mean config.data.sampler?"
    assert not (tmp_path / "data").exists()  # refused before anything was built
    with pytest.raises(UnknownDataKeyError, match=r"config.data.zzz is not a data_pipelines key; known: augment, "):
        DataConfig.parse({"data": {"zzz": 1}})
