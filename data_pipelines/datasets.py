"""Built datasets: which TFDS builder holds a dataset, where it lives, building it, its near/far planes.

What distinguishes the datasets is their `DatasetSpec` (data_pipelines/registry.py); this module
reads it. `NEAR_FAR` and `PRE_RESIZE` are views of the registry kept for callers outside
`data_pipelines`.
"""

from __future__ import annotations

import os
from pathlib import Path

from data_pipelines.config import DataConfig
from data_pipelines.errors import DatasetNotBuiltError
from data_pipelines.registry import DATASET_SPECS, spec

NEAR_FAR = {name: (s.near, s.far) for name, s in DATASET_SPECS.items()}
PRE_RESIZE = {name: s.pre_resize for name, s in DATASET_SPECS.items() if s.pre_resize is not None}
FILE_FORMAT = "array_record"  # random access: tfds data sources, resumable iterators


def resolve_data_dir(data_dir=None, config=None) -> str:
    """Explicit argument > config.data.data_dir > $LOCOJAX_DATA_DIR > ~/.cache/locojax/datasets.
    `config`: an experiment config or a `DataConfig`."""
    if data_dir is None and config is not None:
        data_dir = DataConfig.parse(config).data_dir
    if data_dir is None:
        data_dir = os.environ.get("LOCOJAX_DATA_DIR") or os.path.join(Path.home(), ".cache", "locojax", "datasets")
    return str(data_dir)


def check_dataset(name: str) -> str:
    return spec(name).name


def near_far(name: str, config=None) -> tuple[float, float]:
    """The dataset's near/far planes, or `config.data.near` / `.far` where set (config: an experiment
    config or a `DataConfig`)."""
    s = spec(name)
    near, far = s.near, s.far
    if config is not None:
        data = DataConfig.parse(config)
        near = float(data.near or near)
        far = float(data.far or far)
    return near, far


def make_builder(name: str, data_dir: str, config=None, synthetic=None, normalize: str = "none"):
    """The TFDS builder instance for dataset `name` under `data_dir` (nothing is built here).

    Args:
      config: an experiment config or a `DataConfig` (None: the defaults); the synthetic dataset's
        sizes and build workers come from it.
      synthetic: a synthetic builder config overriding `config.data.synthetic_*`.
      normalize: (own scenes: colmap, transforms) the scene normalisation of a new import.
    """
    return spec(name).builder_class().for_data(data_dir, DataConfig.parse(config), normalize=normalize,
                                               synthetic=synthetic)


def is_prepared(builder) -> bool:
    return (Path(str(builder.data_dir)) / "dataset_info.json").exists()


def rebuild_hint(name: str, builder) -> str:
    """How to rebuild dataset `name` (whose prepared files are in builder.data_dir)."""
    root = Path(str(builder.data_dir)).parents[2]  # <root>/<builder name>/<config>/<version>
    if spec(name).builds_itself:
        return f"delete {builder.data_dir} and rerun (the {name} dataset rebuilds itself)"
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

    if not spec(name).builds_itself and manual_dir is None:
        raise DatasetNotBuiltError(
            f"dataset {name!r} is not built under {builder.data_dir}{_older_builds(builder)}; build it with "
            f"`python -m data_pipelines.build {name} --manual_dir=SRC --data_dir=...`")
    if manual_dir is not None and not Path(manual_dir).is_dir():
        raise DatasetNotBuiltError(f"dataset {name!r}: manual_dir {manual_dir} does not exist")
    dl_config = tfds.download.DownloadConfig(manual_dir=manual_dir) if manual_dir else None
    builder.download_and_prepare(file_format=FILE_FORMAT, download_config=dl_config)
    return builder
