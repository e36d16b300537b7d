"""Defaults of `config.data` (the Data contract, data_pipelines/CONTRACT.md) and how they are read.

Top-level keys read from the experiment config: `dataset` (default "synthetic"), `batch_size` (global),
`seed`. Everything else lives under `config.data`; a missing key takes the default below.
`DataConfig.parse` reads them all once into a typed, frozen record (an unknown `config.data` key is
an error naming it); `data_value` reads one key.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Callable, Optional

import ml_collections
from ml_collections import FieldReference

from data_pipelines.errors import UnknownDataKeyError


def default_data_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # None -> $LOCOJAX_DATA_DIR, else ~/.cache/locojax/datasets.
    c.data_dir = FieldReference(None, field_type=str)
    c.image_shape = (256, 256)            # (H, W) batches are resized/cropped to (pixelSplat crop shim)
    c.sampler = "boundedv2"               # "boundedv2" (VolSplat), "globalsplat", "tokengs"
    # None -> the sampler's paper default: boundedv2 6/8, globalsplat 13/12, tokengs 2/6 (4/4 on DL3DV).
    c.num_context_views = FieldReference(None, field_type=int)
    c.num_target_views = FieldReference(None, field_type=int)
    # Frame-gap overrides (None -> sampler default; see data_pipelines/samplers/*).
    c.min_gap = FieldReference(None, field_type=int)
    c.max_gap = FieldReference(None, field_type=int)
    c.eval_protocol = "synthetic"
    c.eval_num_scenes = FieldReference(None, field_type=int)   # None = all scenes of the protocol
    c.eval_batch_size = FieldReference(None, field_type=int)   # per process; None = batch_size // processes
    c.augment = False                     # colour jitter + crop, shared across the views of a sample
    # Training only: probability of mirroring a sample (all its views; augment.reflect_views).
    # TokenGS/LocusGS train with 0.5; 0 draws no random number (other samplers' streams unchanged).
    c.reflect_prob = 0.0
    # Also load per-view depth into Views.depth ([B, V, H, W] z-depth, 0 = unknown; cropped/resized
    # with the images, nearest neighbour). Only datasets that store depth (synthetic, scannet).
    c.load_depth = False
    # Training only: crop each view to the largest rectangle centred on its principal point first
    # (GlobalSplat's preprocessing; a no-op when cx = cy = 0.5, as in RE10K). Off by default: on the
    # synthetic data (cx, cy = 0.5 +- 0.01) it would crop a few pixels and upsample back.
    c.principal_point_crop = False
    # Cameras of each sample (context + target) moved into a scene frame: "none" (as stored) or
    # "globalsplat" (the official GlobalSplat preprocessing; data_pipelines/scene_frame.py).
    c.scene_frame = "none"
    # near/far overrides (None -> the dataset's, data_pipelines/registry.py: synthetic 0.5/15,
    # re10k/acid/dl3dv 1/100, scannet 0.5/15).
    c.near = FieldReference(None, field_type=float)
    c.far = FieldReference(None, field_type=float)
    # The embedded synthetic dataset (built on first use under data_dir).
    c.synthetic_num_train_scenes = 256
    c.synthetic_num_test_scenes = 32
    c.synthetic_image_size = 256          # stored resolution (square); batches are resized to image_shape
    c.synthetic_num_frames = 64
    c.synthetic_seed = 0
    c.build_workers = 2                   # processes rendering the synthetic dataset (<= 2)
    c.prefetch = 2                        # batches prepared ahead in background threads (0 = none)
    c.num_threads = 1                     # threads building batches concurrently (when prefetch > 0)
    return c


def _get(mapping, key: str):
    return mapping.get(key, None) if hasattr(mapping, "get") else getattr(mapping, key, None)


def data_value(config, key: str):
    """config.data.<key>, falling back to the default (works for dicts and ConfigDicts)."""
    data = _get(config, "data")
    if data is not None:
        value = _get(data, key)
        if value is not None:
            return value
    default = default_data_config()
    if key not in default:
        raise KeyError(f"config.data.{key} is not a data_pipelines key (known: {sorted(default.keys())})")
    return default[key]


def top_value(config, key: str, default):
    value = config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)
    return default if value is None else value


def _optional(parse: Callable) -> Callable:
    return lambda v: None if v is None else parse(v)


def _shape(v) -> tuple[int, int]:
    return tuple(int(x) for x in v)


def _key(parse: Callable):
    return dataclasses.field(metadata={"parse": parse})


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The data settings of one experiment config, parsed once (`DataConfig.parse`).

    The fields are the keys of `default_data_config()` (their meaning is written there), typed, with
    None values replaced by the defaults as `data_value` does, plus the top-level `dataset`,
    `batch_size` (global, all processes) and `seed`.
    """

    dataset: str = _key(str)
    batch_size: int = _key(int)
    seed: int = _key(int)
    data_dir: Optional[str] = _key(_optional(str))
    image_shape: tuple[int, int] = _key(_shape)
    sampler: str = _key(str)
    num_context_views: Optional[int] = _key(_optional(int))
    num_target_views: Optional[int] = _key(_optional(int))
    min_gap: Optional[int] = _key(_optional(int))
    max_gap: Optional[int] = _key(_optional(int))
    eval_protocol: str = _key(str)
    eval_num_scenes: Optional[int] = _key(_optional(int))
    eval_batch_size: Optional[int] = _key(_optional(int))
    augment: bool = _key(bool)
    reflect_prob: float = _key(float)
    load_depth: bool = _key(bool)
    principal_point_crop: bool = _key(bool)
    scene_frame: str = _key(str)
    near: Optional[float] = _key(_optional(float))
    far: Optional[float] = _key(_optional(float))
    synthetic_num_train_scenes: int = _key(int)
    synthetic_num_test_scenes: int = _key(int)
    synthetic_image_size: int = _key(int)
    synthetic_num_frames: int = _key(int)
    synthetic_seed: int = _key(int)
    build_workers: int = _key(int)
    prefetch: int = _key(int)
    num_threads: int = _key(int)

    @classmethod
    def parse(cls, config=None) -> "DataConfig":
        """The DataConfig of an experiment config (ConfigDict or dict; None: all defaults). A DataConfig
        is returned as it is.

        Raises:
          UnknownDataKeyError: one line naming `config.data.<key>` and the closest known keys.
        """
        if isinstance(config, DataConfig):
            return config
        config = {} if config is None else config
        data = _get(config, "data")
        defaults = default_data_config()
        for key in (data.keys() if hasattr(data, "keys") else ()):
            if key not in defaults:
                close = difflib.get_close_matches(key, list(defaults.keys()), n=3)
                hint = (f"did you mean {' or '.join(f'config.data.{k}' for k in close)}?" if close
                        else f"known: {', '.join(sorted(defaults.keys()))}")
                raise UnknownDataKeyError(f"config.data.{key} is not a data_pipelines key; {hint}")
        parsers = {f.name: f.metadata["parse"] for f in dataclasses.fields(cls)}
        values = dict(dataset=top_value(config, "dataset", "synthetic"), batch_size=top_value(config, "batch_size", 1),
                      seed=top_value(config, "seed", 0))
        for key in defaults.keys():
            value = _get(data, key) if data is not None else None
            values[key] = defaults[key] if value is None else value
        return cls(**{key: parsers[key](value) for key, value in values.items()})
