"""Dataset registry: which TFDS builder holds each dataset, where it lives, its near/far planes.

near/far (metres, or the dataset's units): synthetic 0.5 / 15 (data_pipelines/synthetic/generate.py);
re10k and acid 1 / 100 (pixelSplat's dataset config; VolSplat trains RE10K with 0.5 / 100 -- set
config.data.near to match it); dl3dv 1 / 100 (assumed like RE10K: not verified against DepthSplat's
DL3DV config); scannet 0.5 / 15
(FreeSplat's evaluation); colmap and transforms (users' own scenes, any units) 0.5 / 100, a wide
default: the build prints the sparse points' depth range, and `config.data.near` / `.far` override them.
"""

from __future__ import annotations

import os
from pathlib import Path

from data_pipelines.config import DATASETS, data_value
from data_pipelines.errors import DatasetNotBuiltError, UnknownDatasetError

NEAR_FAR = {
    "synthetic": (0.5, 15.0),
    "re10k": (1.0, 100.0),
    "acid": (1.0, 100.0),
    "dl3dv": (1.0, 100.0),
    "scannet": (0.5, 15.0),
    "colmap": (0.5, 100.0),
    "transforms": (0.5, 100.0),
}
# Resize applied before the crop shim (FreeSplat resizes ScanNet frames to 640x480 first).
PRE_RESIZE = {"scannet": (480, 640)}
FILE_FORMAT = "array_record"  # random access: tfds data sources, resumable iterators


def resolve_data_dir(data_dir=None, config=None) -> str:
    """Explicit argument > config.data.data_dir > $LOCOJAX_DATA_DIR > ~/.cache/locojax/datasets."""
    if data_dir is None and config is not None:
        data_dir = data_value(config, "data_dir")
    if data_dir is None:
        data_dir = os.environ.get("LOCOJAX_DATA_DIR") or os.path.join(Path.home(), ".cache", "locojax", "datasets")
    return str(data_dir)


def check_dataset(name: str) -> str:
    if name not in DATASETS:
        raise UnknownDatasetError(f"config.dataset={name!r}: unknown dataset; expected one of "
                                  f"{', '.join(DATASETS)}")
    return name


def near_far(name: str, config=None) -> tuple[float, float]:
    near, far = NEAR_FAR[check_dataset(name)]
    if config is not None:
        near = float(data_value(config, "near") or near)
        far = float(data_value(config, "far") or far)
    return near, far


def synthetic_config_from(config=None):
    """The synthetic builder config matching `config.data.synthetic_*` (defaults if config is None)."""
    from data_pipelines.builders.synthetic import synthetic_config

    get = (lambda k: data_value(config, k)) if config is not None else (lambda k: data_value({}, k))
    size = int(get("synthetic_image_size"))
    return synthetic_config(int(get("synthetic_num_train_scenes")), int(get("synthetic_num_test_scenes")),
                            size, size, int(get("synthetic_num_frames")), int(get("synthetic_seed")))


def make_builder(name: str, data_dir: str, config=None, synthetic=None, normalize: str = "none"):
    """The TFDS builder instance for dataset `name` under `data_dir` (nothing is built here).
    `normalize` (colmap, transforms) is the scene normalisation of a new import."""
    check_dataset(name)
    if name == "synthetic":
        from data_pipelines.builders import synthetic as syn

        workers = int(data_value(config, "build_workers")) if config is not None else 2
        return syn.make_builder(synthetic or synthetic_config_from(config), data_dir, num_workers=workers)
    if name in ("re10k", "acid", "dl3dv"):
        from data_pipelines.builders import chunks

        return chunks.BUILDERS[name](data_dir=data_dir)
    if name in ("colmap", "transforms"):
        from data_pipelines.builders import own_scenes

        return own_scenes.BUILDERS[name](data_dir=data_dir, normalize=normalize)
    from data_pipelines.builders import scannet

    return scannet.LocojaxScannet(data_dir=data_dir)


def is_prepared(builder) -> bool:
    return (Path(str(builder.data_dir)) / "dataset_info.json").exists()


def rebuild_hint(name: str, builder) -> str:
    """How to rebuild dataset `name` (whose prepared files are in builder.data_dir)."""
    root = Path(str(builder.data_dir)).parents[2]  # <root>/<builder name>/<config>/<version>
    if name == "synthetic":
        return f"delete {builder.data_dir} and rerun (the synthetic dataset rebuilds itself)"
    return (f"delete {builder.data_dir} and rebuild it with `python -m data_pipelines.build {name} "
            f"--manual_dir=SRC --data_dir={root}`")


def _older_builds(builder) -> str:
    """' (older builds here: 1.0.0, ...: not used, see docs/data.md)' when other versions are on disk."""
    here = Path(str(builder.data_dir))
    other = sorted(p.name for p in here.parent.glob("*") if p.name != here.name and (p / "dataset_info.json").exists())
    return f" (older builds there: {', '.join(other)}: not used, see docs/data.md)" if other else ""


def ensure_built(name: str, builder, manual_dir=None):
    """Build if needed. Synthetic builds itself; the others need their source files (manual_dir)."""
    if is_prepared(builder):
        return builder
    import tensorflow_datasets as tfds

    if name != "synthetic" and manual_dir is None:
        raise DatasetNotBuiltError(
            f"dataset {name!r} is not built under {builder.data_dir}{_older_builds(builder)}; build it with "
            f"`python -m data_pipelines.build {name} --manual_dir=SRC --data_dir=...`")
    if manual_dir is not None and not Path(manual_dir).is_dir():
        raise DatasetNotBuiltError(f"dataset {name!r}: manual_dir {manual_dir} does not exist")
    dl_config = tfds.download.DownloadConfig(manual_dir=manual_dir) if manual_dir else None
    builder.download_and_prepare(file_format=FILE_FORMAT, download_config=dl_config)
    return builder
