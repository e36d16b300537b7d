"""`load_scenes`: iterate the scenes of a built dataset (the synthetic one is built on first use)."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

from data_pipelines import datasets
from data_pipelines.config import DataConfig
from data_pipelines.scene import Scene
from data_pipelines.storage import SceneSource


def open_split(name: str, split: str, data_dir=None, config=None, manual_dir=None, synthetic=None) -> SceneSource:
    """The `SceneSource` of dataset `name`, split `split` (builds synthetic if missing). `config`: an
    experiment config or a `DataConfig` (None: the defaults)."""
    data = DataConfig.parse(config)
    data_dir = datasets.resolve_data_dir(data_dir, data)
    builder = datasets.make_builder(name, data_dir, config=data, synthetic=synthetic)
    datasets.ensure_built(name, builder, manual_dir=manual_dir)
    return SceneSource(builder, split)


def load_scenes(name: str, split: str = "test", data_dir: Optional[str] = None, *, config=None,
                keys: Optional[Sequence[str]] = None, with_depth: bool = True, synthetic=None) -> Iterator[Scene]:
    """Yield `Scene`s (all frames decoded, timestamp order) of dataset `name` ("synthetic", "re10k",
    "acid", "dl3dv", "scannet"), split "train" or "test". `keys` restricts to (and orders by) keys;
    a requested key that is missing raises KeyError naming it. `config` (optional) supplies
    config.data.synthetic_* sizes and data_dir."""
    source = open_split(name, split, data_dir, config, synthetic=synthetic)
    if keys is None:
        order = range(len(source))
    else:
        missing = [k for k in keys if k not in source.index_of]
        if missing:
            raise KeyError(f"{name}/{split}: {len(missing)} requested scenes not in the dataset, e.g. {missing[:5]}")
        order = [source.index_of[k] for k in keys]
    for i in order:
        yield source.scene(i, with_depth=with_depth)
