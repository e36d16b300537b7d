"""TFDS builders for users' own posed images: COLMAP models and transforms.json files.

manual_dir is one scene folder or a folder of scene folders (sorted by name); each scene's key is its
folder's name. Every scene goes to the "test" split, the split that `load_scenes`, evaluation,
`experiments.predict` and `data_pipelines.check` read. A bad scene stops the build with one line naming
the file and the image: TFDS writes into a temporary folder, so nothing half-built is left and an
existing dataset is never touched. The metadata records, per scene, the source file, the frame names,
the scene normalisation and (COLMAP) the sparse points.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow_datasets as tfds

from data_pipelines.builders.features import scene_features

SPLIT = "test"


class _OwnScenesBuilder(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "first release"}
    FORMAT = ""

    def __init__(self, *, normalize: str = "none", **kwargs):
        self._normalize = normalize
        super().__init__(**kwargs)

    @classmethod
    def for_data(cls, data_dir: str, data, normalize: str = "none", synthetic=None) -> "_OwnScenesBuilder":
        """The builder under `data_dir` (the registry's interface, `DatasetSpec.builder`); `normalize`
        is the scene normalisation of a new import; `data` and `synthetic` do not apply."""
        return cls(data_dir=data_dir, normalize=normalize)

    def _info(self) -> tfds.core.DatasetInfo:
        # disable_shuffling must reach DatasetInfo (a class attribute is ignored by TFDS 4.9): records
        # then keep the sorted folder order that the metadata's keys_test lists.
        return self.dataset_info_from_configs(features=scene_features(), description=self.__doc__,
                                              metadata=tfds.core.MetadataDict(), disable_shuffling=True)

    def _reader(self):
        raise NotImplementedError

    def scene_folders(self, root: Path) -> list:
        reader = self._reader()
        if reader.is_scene_folder(root):
            return [root]
        folders = sorted(p for p in root.iterdir() if p.is_dir() and reader.is_scene_folder(p)) if root.is_dir() else []
        if not folders:
            raise ValueError(f"{root}: neither a {self.FORMAT} scene folder nor a folder of them")
        return folders

    def _split_generators(self, dl_manager):
        root = Path(str(dl_manager.manual_dir))
        if not root.is_dir():
            raise FileNotFoundError(f"{self.name}: manual_dir {root} does not exist")
        folders = self.scene_folders(root)
        self.info.metadata["source"] = str(root.resolve())
        self.info.metadata["normalize"] = self._normalize
        return {SPLIT: self._generate_examples(folders)}

    def _generate_examples(self, folders):
        from data_pipelines.readers.posed_images import to_record

        reader = self._reader()
        keys, frames, scenes = [], [], {}
        for folder in folders:
            key, record, meta = to_record(reader.read_scene(folder), self._normalize)
            keys.append(key)
            frames.append(len(record["images"]))
            scenes[key] = meta
            yield key, record
        self.info.metadata[f"keys_{SPLIT}"] = keys
        self.info.metadata[f"frames_{SPLIT}"] = frames
        self.info.metadata["scenes"] = scenes


class LocojaxColmap(_OwnScenesBuilder):
    """Posed images from COLMAP sparse models (text or binary), undistorted to pinhole cameras."""

    MANUAL_DOWNLOAD_INSTRUCTIONS = "manual_dir: a scene folder (images/ + sparse/0/ or sparse/) or a folder of them"
    FORMAT = "COLMAP"

    def _reader(self):
        from data_pipelines.readers import colmap_model

        return colmap_model


class LocojaxTransforms(_OwnScenesBuilder):
    """Posed images from nerfstudio / instant-ngp transforms.json files (OpenGL camera axes)."""

    MANUAL_DOWNLOAD_INSTRUCTIONS = "manual_dir: a folder with transforms.json and its images, or a folder of them"
    FORMAT = "transforms.json"

    def _reader(self):
        from data_pipelines.readers import transforms_json

        return transforms_json


BUILDERS = {"colmap": LocojaxColmap, "transforms": LocojaxTransforms}


def scene_metadata(builder, key: str) -> dict:
    """The metadata one imported scene was recorded with (KeyError naming the scene if absent)."""
    scenes = (builder.info.metadata or {}).get("scenes", {})
    if key not in scenes:
        raise KeyError(f"{builder.data_dir}: no scene {key!r} (have {', '.join(scenes) or 'none'})")
    return scenes[key]
