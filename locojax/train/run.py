"""Everything a run is built from, below the loop that trains it (MaxText's `setup_train_loop`):
`build_run(config, example_batch) -> Run` (model, mesh, optimizer, renderer, abstract state and its
shardings), the data contract's two constructors (`DataSource`), the eval protocol and config a run is
evaluated with, and placeholder batches with the shapes `config.data` implies (compiling or tracing from
shapes alone). Training (`loop`), evaluation (`eval_run`), rendering (`render_run`), ahead-of-time
compilation (`aot`), `describe` and importing weights (`import_run`) all start here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import numpy as np

from locojax.models.registry import build_model
from locojax.render.factory import make_render_fn
from locojax.train import sharding as shd
from locojax.train.grad_norm import concat_limit
from locojax.train.optimizer import make_optimizer
from locojax.train.state import abstract_params, abstract_state_from_params, make_init_fn
from locojax.train.step import jit_train_step, make_train_step
from locojax.types import Batch, Views


@dataclasses.dataclass
class DataSource:
    """The data contract's two constructors (data_pipelines/CONTRACT.md); tests may pass their own."""

    make_train_iterator: Callable
    make_eval_iterator: Callable


def default_data_source() -> DataSource:
    # Imported here, not at the top: the data pipelines import TensorFlow (seconds), which building a
    # run from placeholder shapes (aot, describe, import_weights) never needs.
    from data_pipelines import make_eval_iterator, make_train_iterator

    return DataSource(make_train_iterator, make_eval_iterator)


def eval_protocol(config, protocol: Optional[str] = None) -> str:
    return protocol or config.eval.get("protocol") or config.data.get("eval_protocol") or "synthetic"


def eval_config(config):
    """The config the eval iterator sees (eval.num_scenes overrides data.eval_num_scenes)."""
    if config.eval.get("num_scenes") is None:
        return config
    c = config.copy_and_resolve_references()
    c.data.eval_num_scenes = int(config.eval.num_scenes)
    return c


@dataclasses.dataclass
class Run:
    """Everything built for a run (shared by training and the evaluate script)."""

    config: Any
    model: Any
    mesh: Any
    tx: Any
    schedule: Callable
    render: Callable
    init_fn: Callable
    abstract_state: Any
    state_shardings: Any
    example_batch: Any
    labels: Any
    process_index: int
    process_count: int


def build_run(config, example_local_batch, model=None) -> Run:
    """Builds the run of `config` from one process-local batch (only its shapes and dtypes are used).

    Args:
      config: the resolved run config.
      example_local_batch: a `Batch` [B_local, V, ...] (e.g. `peek_batch(train_iterator)` or
        `placeholder_batch(config)`).
      model: the model to use; default `build_model(config)`.
    Returns:
      A `Run`; nothing is allocated on device (the state is abstract, `eval_shape` of the init).
    """
    process_index, process_count = jax.process_index(), jax.process_count()
    mesh = shd.make_mesh()
    shd.check_batch_size(int(config.batch_size), mesh, process_count)
    model = build_model(config) if model is None else model
    render = make_render_fn(config.render, model.sh_degree)
    example = shd.global_batch(jax.tree_util.tree_map(np.zeros_like, example_local_batch), mesh)
    rng = jax.random.PRNGKey(int(config.seed))
    params_shape = abstract_params(model, rng, example)
    labels = model.param_labels(params_shape)
    tx, schedule = make_optimizer(config, params_shape, labels)
    init_fn = make_init_fn(model, tx)
    abstract = abstract_state_from_params(params_shape, rng, tx)
    shardings = shd.state_shardings(abstract, mesh, config.sharding)
    return Run(config, model, mesh, tx, schedule, render, init_fn, abstract, shardings, example,
               labels, process_index, process_count)


def run_train_step(run: Run):
    """The run's jitted train step, built in one place: training, `describe` and the AOT benchmarks
    compile the same program (and so share one compilation-cache entry)."""
    step = make_train_step(run.model, run.tx, run.schedule, run.render,
                           norm_concat_below=concat_limit(run.config.sharding))
    return jit_train_step(step, run.state_shardings, shd.batch_sharding(run.mesh), shd.replicated(run.mesh))


def peek_batch(iterator):
    """One batch for shapes, leaving the iterator where it was."""
    saved = iterator.get_state()
    batch = next(iterator)
    iterator.set_state(saved)
    return batch


def placeholder_views(batch_size: int, num_views: int, image_shape, depth: bool = False) -> Views:
    """Zero images with valid cameras (identity poses, unit normalized focal length) [B, V, ...];
    `depth`: with Views.depth [B, V, H, W] (as `config.data.load_depth=True` batches have)."""
    h, w = image_shape
    k = np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32)
    shape = (batch_size, num_views)
    return Views(
        images=np.zeros(shape + (h, w, 3), np.float32),
        intrinsics=np.broadcast_to(k, shape + (3, 3)).copy(),
        c2w=np.broadcast_to(np.eye(4, dtype=np.float32), shape + (4, 4)).copy(),
        near=np.full(shape, 0.1, np.float32),
        far=np.full(shape, 100.0, np.float32),
        index=np.broadcast_to(np.arange(num_views, dtype=np.int32), shape).copy(),
        depth=np.ones(shape + (h, w), np.float32) if depth else None,
    )


def placeholder_batch(config, local_batch_size: int | None = None) -> Batch:
    """A process-local Batch with the shapes `config.data` implies (for shapes only)."""
    b = int(config.batch_size) // jax.process_count() if local_batch_size is None else local_batch_size
    d = config.data
    for key in ("num_context_views", "num_target_views", "image_shape"):
        if d.get(key) is None:
            raise ValueError(f"config.data.{key} must be set to compile from shapes alone")
    depth = bool(d.get("load_depth", False))
    return Batch(context=placeholder_views(b, int(d.num_context_views), tuple(d.image_shape), depth),
                 target=placeholder_views(b, int(d.num_target_views), tuple(d.image_shape), depth),
                 scene_id=np.arange(b, dtype=np.int32))
