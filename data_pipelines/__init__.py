"""locojax data pipelines: TFDS builders for RealEstate10K/ACID/DL3DV/ScanNet and the embedded
procedural dataset, the papers' view samplers, evaluation protocols and resumable batch iterators.

    from data_pipelines import load_scenes, make_train_iterator, make_eval_iterator

Imports are lazy (PEP 562) so that worker processes of the synthetic build, which import
`data_pipelines.synthetic`, do not pay for TensorFlow.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Scene": "data_pipelines.scene",
    "load_scenes": "data_pipelines.loading",
    "make_train_iterator": "data_pipelines.iterators",
    "make_eval_iterator": "data_pipelines.iterators",
    "default_data_config": "data_pipelines.config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'data_pipelines' has no attribute {name!r}")
