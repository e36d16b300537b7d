"""The tiny run config + toy model/data used by the trainer tests (and their subprocess drivers)."""

from __future__ import annotations

import os

import ml_collections
import numpy as np

from configs.common import base_config
from locojax.train.run import DataSource


def toy_config(**overrides) -> ml_collections.ConfigDict:
    c = base_config()
    c.model_family = "toy"
    c.model = ml_collections.ConfigDict(dict(num_gaussians=32, hidden=16))
    c.total_steps = 6
    c.batch_size = 2
    c.log_every = 1
    c.eval_every = 3
    c.checkpoint_every = 2
    c.progress_bar = False
    c.data.image_shape = (16, 16)
    c.data.num_context_views = 2
    c.data.num_target_views = 2
    c.data.eval_num_scenes = 3
    c.eval.lpips = False
    c.eval.num_sample_images = 1
    c.optimizer.learning_rate = 5e-2
    c.optimizer.warmup_steps = 1
    c.render.backend = "dense"
    for k, v in overrides.items():
        node = c
        *parents, leaf = k.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = v
    return c


def toy_model(config):
    import train_toy_model

    return train_toy_model.build(config)


def toy_data() -> DataSource:
    import train_toy_data

    return DataSource(train_toy_data.make_train_iterator, train_toy_data.make_eval_iterator)


def final_params_path(workdir, step: int) -> str:
    """Where `train_toy_driver.py` saves the flattened parameters of a run that ended at `step`."""
    return os.path.join(workdir, f"final_params_step{step}.npz")


def final_params(workdir, step: int) -> dict:
    with np.load(final_params_path(workdir, step)) as f:
        return {k: f[k] for k in f.files}
