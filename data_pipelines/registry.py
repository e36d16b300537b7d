"""The dataset registry: one `DatasetSpec` per dataset and the training view samplers by name.

Everything that differs between datasets is a field of its spec, read by the rest of
`data_pipelines` through `spec(name)`: the TFDS builder, the near/far planes, a resize before the
crop shim, how evaluation-index keys name scenes, the samplers' view counts on the dataset, and
whether it builds itself or is a user's import. A new format is a reader (`readers/`), a builder
(`builders/`) and one entry in `DATASET_SPECS` (docs/data.md, "Adding a dataset format").

near/far (metres, or the dataset's units): synthetic 0.5 / 15 (data_pipelines/synthetic/generate.py);
re10k and acid 1 / 100 (pixelSplat's dataset config; VolSplat trains RE10K with 0.5 / 100: set
config.data.near to match it); dl3dv 1 / 100 (assumed like RE10K: not verified against DepthSplat's
DL3DV config); scannet 0.5 / 15 (FreeSplat's evaluation); colmap and transforms (users' own scenes,
any units) 0.5 / 100, a wide default: the build prints the sparse points' depth range, and
`config.data.near` / `.far` override them.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from typing import Callable, Mapping, Optional

from data_pipelines.errors import UnknownDatasetError
from data_pipelines.samplers.boundedv2 import BoundedV2Sampler
from data_pipelines.samplers.globalsplat import GlobalSplatSampler
from data_pipelines.samplers.tokengs import TokenGSSampler

_NO_VIEWS: Mapping[str, tuple[int, int]] = types.MappingProxyType({})


def import_object(path: str):
    """The object at "package.module:name" (builders are imported on use: TFDS imports TensorFlow)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """What distinguishes one dataset (the value of `config.dataset`) from the others.

    Attributes:
      name: the dataset's name in configs and on the command line; its TFDS builder is called
        `locojax_<name>` (`storage.SceneSource` names the dataset in error messages from it).
      builder: "module:Class" of its TFDS builder; the class has a classmethod
        `for_data(data_dir, data: DataConfig, normalize: str)` returning an instance.
      near, far: the dataset's near/far planes, in its units (module docstring for the sources).
      pre_resize: (H, W) every frame (and depth map) is resized to before the crop shim, or None.
      eval_key: "module:function" mapping an evaluation-index key that is not a scene key to the
        scene key, or None (index keys are scene keys).
      sampler_views: sampler name -> (context, target) view counts on this dataset when
        `config.data.num_context_views` / `num_target_views` are None (else the sampler's default).
      builds_itself: built on first use from `config.data`, no source files (`--manual_dir`).
      own_scenes: users' imports (docs/your_own_scenes.md): test split only, the builder takes a
        scene normalisation, one source folder per data directory, per-scene build metadata.
      sparse_points: the per-scene metadata holds the imported sparse points (`data_pipelines.check`).
    """

    name: str
    builder: str
    near: float
    far: float
    pre_resize: Optional[tuple[int, int]] = None
    eval_key: Optional[str] = None
    sampler_views: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=lambda: _NO_VIEWS)
    builds_itself: bool = False
    own_scenes: bool = False
    sparse_points: bool = False

    def builder_class(self):
        return import_object(self.builder)

    def eval_key_function(self) -> Optional[Callable[[str], str]]:
        return import_object(self.eval_key) if self.eval_key else None


DATASET_SPECS: Mapping[str, DatasetSpec] = types.MappingProxyType({s.name: s for s in [
    DatasetSpec("synthetic", "data_pipelines.builders.synthetic:LocojaxSynthetic", 0.5, 15.0,
                builds_itself=True),
    DatasetSpec("re10k", "data_pipelines.builders.chunks:LocojaxRe10k", 1.0, 100.0),
    DatasetSpec("acid", "data_pipelines.builders.chunks:LocojaxAcid", 1.0, 100.0),
    # TokenGS/LocusGS train DL3DV with 4 input + 4 target views (tokengs/data/registry.py; 2 + 6 on RE10K).
    DatasetSpec("dl3dv", "data_pipelines.builders.chunks:LocojaxDl3dv", 1.0, 100.0,
                sampler_views=types.MappingProxyType({"tokengs": (4, 4)})),
    # FreeSplat resizes ScanNet frames to 640x480 before its crop shim; its index keys are "<scene>_<k>".
    DatasetSpec("scannet", "data_pipelines.builders.scannet:LocojaxScannet", 0.5, 15.0, pre_resize=(480, 640),
                eval_key="data_pipelines.readers.scannet_freesplat:eval_key_to_scene"),
    DatasetSpec("colmap", "data_pipelines.builders.own_scenes:LocojaxColmap", 0.5, 100.0,
                own_scenes=True, sparse_points=True),
    DatasetSpec("transforms", "data_pipelines.builders.own_scenes:LocojaxTransforms", 0.5, 100.0,
                own_scenes=True),
]})

DATASETS: tuple[str, ...] = tuple(DATASET_SPECS)
# The order in which tools look for a scene key in the built datasets (`experiments.predict`, the
# viewer): users' imports first, the self-built synthetic dataset last.
SEARCH_ORDER: tuple[str, ...] = tuple(sorted(DATASETS, key=lambda n: (not DATASET_SPECS[n].own_scenes,
                                                                       DATASET_SPECS[n].builds_itself)))

# Training view samplers by `config.data.sampler` (data_pipelines/samplers/).
SAMPLERS: Mapping[str, type] = types.MappingProxyType({
    "boundedv2": BoundedV2Sampler,      # VolSplat's bounded sampler
    "globalsplat": GlobalSplatSampler,
    "tokengs": TokenGSSampler,
})


def spec(name: str) -> DatasetSpec:
    """The spec of dataset `name`; UnknownDatasetError (one line, naming config.dataset) otherwise."""
    if name not in DATASET_SPECS:
        raise UnknownDatasetError(f"config.dataset={name!r}: unknown dataset; expected one of "
                                  f"{', '.join(DATASETS)}")
    return DATASET_SPECS[name]


def make_sampler(name: str, *, dataset: str = "synthetic", num_context_views=None, num_target_views=None,
                 min_gap=None, max_gap=None):
    """The sampler called `name` (a key of `SAMPLERS`) with paper defaults; view counts left
    None take the dataset's (`DatasetSpec.sampler_views`), else the sampler's own."""
    if name not in SAMPLERS:
        raise ValueError(f"config.data.sampler={name!r}: expected one of {', '.join(map(repr, SAMPLERS))}")
    kwargs = {k: v for k, v in dict(num_context_views=num_context_views, num_target_views=num_target_views,
                                    min_gap=min_gap, max_gap=max_gap).items() if v is not None}
    dataset_spec = DATASET_SPECS.get(dataset)
    views = dataset_spec.sampler_views.get(name) if dataset_spec is not None else None
    if views is not None:
        kwargs.setdefault("num_context_views", views[0])
        kwargs.setdefault("num_target_views", views[1])
    return SAMPLERS[name](**kwargs)
