"""TFDS builder of the procedural synthetic dataset (the embedded default; nothing downloaded).

Config names encode everything the content depends on, e.g. `n256-32_256x256_f64_s0` (256 train and
32 test scenes, 256x256, 64 frames, seed 0); `load_scenes`/the iterators build the configured one
on first use. Frames are stored as JPEG q95 (4:4:4), depth as 16-bit PNG at 4000 units/m (0.25 mm
steps, max 16.38 m). Rendering runs in up to `num_workers` spawned processes (numpy only).
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import dataclasses
import multiprocessing

import numpy as np
import tensorflow_datasets as tfds
import tqdm

from data_pipelines.builders.features import scene_features
from data_pipelines.synthetic.encode import encode_scene


@dataclasses.dataclass(eq=False)
class SyntheticConfig(tfds.core.BuilderConfig):
    num_train: int = 256
    num_test: int = 32
    height: int = 256
    width: int = 256
    num_frames: int = 64
    seed: int = 0
    store_depth: bool = True


def synthetic_config(num_train=256, num_test=32, height=256, width=256, num_frames=64, seed=0) -> SyntheticConfig:
    name = f"n{num_train}-{num_test}_{height}x{width}_f{num_frames}_s{seed}"
    return SyntheticConfig(name=name, description="procedural rooms", num_train=num_train, num_test=num_test,
                           height=height, width=width, num_frames=num_frames, seed=seed)


def synthetic_config_from(data) -> SyntheticConfig:
    """The builder config of `config.data.synthetic_*` (`data`: a `data_pipelines.config.DataConfig`)."""
    size = data.synthetic_image_size
    return synthetic_config(data.synthetic_num_train_scenes, data.synthetic_num_test_scenes, size, size,
                            data.synthetic_num_frames, data.synthetic_seed)


class LocojaxSynthetic(tfds.core.GeneratorBasedBuilder):
    """Procedural furnished rooms, walkthrough trajectories, analytic ray-cast images and depth."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {"1.0.0": "first release",
                     "1.1.0": "records in generation order (1.0.0 shuffled them; see docs/data.md)"}
    BUILDER_CONFIGS = [synthetic_config(), synthetic_config(4, 2, 64, 64, 64)]

    def __init__(self, *, num_workers: int = 2, **kwargs):
        self._num_workers = max(1, min(int(num_workers), 2))  # the machine has 2 cores, shared
        super().__init__(**kwargs)

    @classmethod
    def for_data(cls, data_dir: str, data, normalize: str = "none", synthetic=None) -> "LocojaxSynthetic":
        """The builder of `config.data.synthetic_*` (or of the builder config `synthetic`) under
        `data_dir`, rendering with `config.data.build_workers` processes (the registry's interface,
        `DatasetSpec.builder`; `data` is a `DataConfig`, `normalize` does not apply)."""
        return make_builder(synthetic or synthetic_config_from(data), data_dir, num_workers=data.build_workers)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=scene_features(),
            description=__doc__,
            metadata=tfds.core.MetadataDict(),
            # Records keep generation order, the order of the metadata's keys_<split> that
            # SceneSource indexes by; TFDS 4.9 reads this flag only from DatasetInfo.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        cfg = self.builder_config
        return {"train": self._generate_examples("train", cfg.num_train),
                "test": self._generate_examples("test", cfg.num_test)}

    def _generate_examples(self, split: str, count: int):
        cfg = self.builder_config
        jobs = [(cfg.seed, split, i, cfg.height, cfg.width, cfg.num_frames, cfg.store_depth) for i in range(count)]
        keys, frames = [], []
        bar = tqdm.tqdm(total=count, desc=f"synthetic {cfg.name} {split}", unit="scene")
        done = 0
        if self._num_workers > 1 and count > 1:
            # spawn, not fork: the parent has TensorFlow's threads running. An executor (unlike
            # multiprocessing.Pool) raises BrokenProcessPool if a worker dies instead of hanging;
            # then (e.g. a __main__ read from stdin, which spawn cannot re-import) the remaining
            # scenes are rendered in this process: the output is the same either way.
            ctx = multiprocessing.get_context("spawn")
            try:
                with concurrent.futures.ProcessPoolExecutor(self._num_workers, mp_context=ctx) as pool:
                    for key, record in pool.map(encode_scene, jobs):
                        keys.append(key)
                        frames.append(len(record["images"]))
                        done += 1
                        bar.update(1)
                        yield key, record
            except concurrent.futures.process.BrokenProcessPool as e:
                tqdm.tqdm.write(f"synthetic build: worker processes failed ({e}); continuing in-process")
        for job in jobs[done:]:
            key, record = encode_scene(job)
            keys.append(key)
            frames.append(len(record["images"]))
            bar.update(1)
            yield key, record
        bar.close()
        self.info.metadata[f"keys_{split}"] = keys
        self.info.metadata[f"frames_{split}"] = frames


def make_builder(config: SyntheticConfig, data_dir: str, num_workers: int = 2) -> LocojaxSynthetic:
    """The builder for `config` (a registered config is passed by name, as TFDS requires)."""
    registered = {c.name for c in LocojaxSynthetic.BUILDER_CONFIGS}
    cfg = config.name if config.name in registered else config
    return LocojaxSynthetic(config=cfg, data_dir=data_dir, num_workers=num_workers)
