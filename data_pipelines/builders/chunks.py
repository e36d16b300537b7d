"""TFDS builders for the pixelSplat chunk layout: RealEstate10K, ACID, and DL3DV (DepthSplat's
conversion, same layout; its stored matrix is the OpenCV w2c = inverse(transform_matrix @
diag(1, -1, -1, 1)) of nerfstudio's transforms.json, so the same inversion yields OpenCV c2w).

manual_dir holds `train/` and/or `test/` stage folders (at least one), each with *.torch chunks and
index.json. Bad chunks/scenes are skipped, counted, stored in the dataset metadata ("skipped") and
printed at the end of the build.
"""

from __future__ import annotations

import logging
from pathlib import Path

import tensorflow_datasets as tfds

from data_pipelines.builders.features import scene_features
from data_pipelines.readers import Skip

log = logging.getLogger(__name__)
STAGES = ("train", "test")


class _ChunkBuilder(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {"1.0.0": "first release",
                     "1.1.0": "records in chunk order (1.0.0 shuffled them; see docs/data.md)"}
    MANUAL_DOWNLOAD_INSTRUCTIONS = "manual_dir: a folder with train/ and/or test/ stage folders of *.torch chunks + index.json"

    @classmethod
    def for_data(cls, data_dir: str, data, normalize: str = "none", synthetic=None) -> "_ChunkBuilder":
        """The builder under `data_dir` (the registry's interface, `DatasetSpec.builder`); `data`
        (a `DataConfig`), `normalize` and `synthetic` do not apply to a converted dataset."""
        return cls(data_dir=data_dir)

    def _info(self) -> tfds.core.DatasetInfo:
        # Records keep chunk order, the order of the metadata's keys_<split> that SceneSource indexes
        # by; TFDS 4.9 reads disable_shuffling only from DatasetInfo, not from a class attribute.
        return self.dataset_info_from_configs(features=scene_features(), description=self.__doc__,
                                              metadata=tfds.core.MetadataDict(), disable_shuffling=True)

    def _split_generators(self, dl_manager):
        root = Path(str(dl_manager.manual_dir))
        if not root.is_dir():
            raise FileNotFoundError(f"{self.name}: manual_dir {root} does not exist")
        stages = [s for s in STAGES if (root / s).is_dir()]
        if not stages:
            raise FileNotFoundError(f"{self.name}: {root} has neither train/ nor test/ stage folders")
        self.info.metadata["skipped"] = []
        return {s: self._generate_examples(root / s, s) for s in stages}

    def _reader(self, stage_dir):
        from data_pipelines.readers.pixelsplat_chunks import iter_stage

        return iter_stage(stage_dir)

    def _generate_examples(self, stage_dir, split):
        keys, frames, skipped = [], [], []
        for item in self._reader(stage_dir):
            if isinstance(item, Skip):
                skipped.append(item.as_dict())
                log.warning("%s/%s: skipped scene %s in %s: %s", self.name, split, item.scene, item.file, item.reason)
                continue
            key, record = item
            keys.append(key)
            frames.append(len(record["images"]))
            yield key, record
        self.info.metadata[f"keys_{split}"] = keys
        self.info.metadata[f"frames_{split}"] = frames
        self.info.metadata["skipped"] = list(self.info.metadata.get("skipped", [])) + skipped
        if skipped:
            print(f"{self.name}/{split}: {len(keys)} scenes written, {len(skipped)} skipped:")
            for s in skipped:
                print(f"  {s['file']}: scene {s['scene']}: {s['reason']}")


class LocojaxRe10k(_ChunkBuilder):
    """RealEstate10K in pixelSplat's chunk format."""


class LocojaxAcid(_ChunkBuilder):
    """ACID in pixelSplat's chunk format."""


class LocojaxDl3dv(_ChunkBuilder):
    """DL3DV in DepthSplat's chunk conversion (pixelSplat layout)."""


BUILDERS = {"re10k": LocojaxRe10k, "acid": LocojaxAcid, "dl3dv": LocojaxDl3dv}
