"""Defaults of `config.data` (the Data contract, data_pipelines/CONTRACT.md) and how they are read.

Top-level keys read from the experiment config: `dataset` (default "synthetic"), `batch_size` (global),
`seed`. Everything else lives under `config.data`; a missing key takes the default below.
"""

from __future__ import annotations

import ml_collections
from ml_collections import FieldReference

DATASETS = ("synthetic", "re10k", "acid", "dl3dv", "scannet", "colmap", "transforms")


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
    # near/far overrides (None -> the dataset's, data_pipelines/datasets.py: synthetic 0.5/15,
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


def data_value(config, key: str):
    """config.data.<key>, falling back to the default (works for dicts and ConfigDicts)."""
    data = config.get("data", None) if hasattr(config, "get") else getattr(config, "data", None)
    if data is not None:
        value = data.get(key, None) if hasattr(data, "get") else getattr(data, key, None)
        if value is not None:
            return value
    default = default_data_config()
    if key not in default:
        raise KeyError(f"config.data.{key} is not a data_pipelines key (known: {sorted(default.keys())})")
    return default[key]


def top_value(config, key: str, default):
    value = config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)
    return default if value is None else value
