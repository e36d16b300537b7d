"""Novel-view videos of a trained run (what `python -m experiments.render` runs): restore a checkpoint,
predict one held-out scene's Gaussians from its context views, render them along a camera path
(`locojax.render.camera_path`) and write RGB | depth side by side as mp4 and GIF under
`DIR/videos/`.

The config is the run's own `config.json`; the scene comes from the config's evaluation protocol
(the same scenes `experiments.evaluate` scores). Rendering is one jitted call per frame with a
single camera, so any frame count compiles once.
"""

from __future__ import annotations

import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from locojax.render.camera_path import camera_path
from locojax.train import checkpoint as ckpt
from locojax.train.run import DataSource, build_run, default_data_source, eval_config, eval_protocol, placeholder_batch
from locojax.train.run_dir import CONFIG_FILE, load_saved_config
from locojax.train.step import cast_floats
from locojax.types import Views


def run_config(workdir: str):
    """The run's saved config; FileNotFoundError naming the file when there is none."""
    config = load_saved_config(workdir)
    if config is None:
        raise FileNotFoundError(f"--workdir={workdir}: no {CONFIG_FILE} (not a training run directory; "
                                "train or import weights into it first)")
    return config


def restore_params(config, workdir: str, step: Optional[int], model=None):
    """(run, params, step) of checkpoint `step` (default: the latest) of the run in `workdir`."""
    if not os.path.isdir(os.path.join(workdir, ckpt.CHECKPOINT_DIR)):
        raise FileNotFoundError(f"--workdir={workdir}: no checkpoints/ (train first)")
    # Shapes only: a checkpoint's structure does not depend on the data, so the train split need not exist.
    run = build_run(config, placeholder_batch(config), model)
    manager = ckpt.make_manager(workdir, int(config.keep_checkpoints))
    try:
        steps = sorted(manager.all_steps())
        if not steps:
            raise FileNotFoundError(f"--workdir={workdir}: no complete checkpoint")
        step = steps[-1] if step is None else int(step)
        if step not in steps:
            raise ValueError(f"--step={step}: no checkpoint at that step in {workdir}; available: {steps}")
        state, _ = ckpt.restore_checked(manager, step, run.abstract_state, run.state_shardings)
    finally:
        manager.close()
    return run, state.params, step


def find_scene(config, data: DataSource, scene: Optional[str], protocol: str):
    """(context Views [1, V, ...] numpy, key) of scene `scene` (default: the first) of the protocol."""
    seen = []
    for batch, keys in data.make_eval_iterator(eval_config(config), protocol=protocol):
        ids = np.asarray(batch.scene_id)
        for i, key in enumerate(keys):
            if i >= ids.shape[0] or ids[i] < 0:
                continue
            if scene is None or key == scene:
                return jax.tree_util.tree_map(lambda x: np.asarray(x)[i:i + 1], batch.context), key
            seen.append(key)
    shown = ", ".join(seen[:8]) + (" ..." if len(seen) > 8 else "")
    raise ValueError(f"--scene={scene!r} is not in protocol {protocol!r}; its scenes: {shown}")


def path_views(context: Views, kind: str, num_frames: int) -> Views:
    """The camera path as Views [1, F, H, W, 3] (images are zeros of the context's size)."""
    c2w, k = camera_path(kind, context.c2w[0], context.intrinsics[0], num_frames)
    h, w = context.image_shape
    f = num_frames
    return Views(images=np.zeros((1, f, h, w, 3), np.float32), intrinsics=k[None], c2w=c2w[None],
                 near=np.full((1, f), float(np.mean(context.near)), np.float32),
                 far=np.full((1, f), float(np.mean(context.far)), np.float32),
                 index=np.full((1, f), -1, np.int32))


def render_path(run, params, context: Views, views: Views, step: int):
    """(rgb [F, H, W, 3], depth [F, H, W], alpha [F, H, W]) of the scene's Gaussians on `views`."""
    predict = jax.jit(lambda p, c: cast_floats(
        run.model.predict(p, c, step=jnp.asarray(step, jnp.int32), train=False,
                          rng=jax.random.PRNGKey(0)).gaussians, jnp.float32))
    gaussians = predict(params, jax.tree_util.tree_map(jnp.asarray, context))
    one = jax.jit(lambda g, v: run.render(g, v))
    rgb, depth, alpha = [], [], []
    for i in range(views.c2w.shape[1]):
        frame = jax.tree_util.tree_map(lambda x: jnp.asarray(x[:, i:i + 1]), views)
        out = one(gaussians, frame)
        rgb.append(np.asarray(out.rgb[0, 0]))
        depth.append(np.asarray(out.depth[0, 0, ..., 0]))
        alpha.append(np.asarray(out.alpha[0, 0, ..., 0]))
    return np.stack(rgb), np.stack(depth), np.stack(alpha)


def render_video(workdir: str, *, scene: Optional[str] = None, path: str = "orbit", frames: int = 60,
                 step: Optional[int] = None, fps: int = 24, protocol: Optional[str] = None, gif: bool = True,
                 data: Optional[DataSource] = None, model=None, verbose: bool = True) -> dict:
    """Returns {"mp4", "gif", "frames" (uint8 [F, H, 2W, 3]), "scene", "step"}."""
    from locojax.io.video import side_by_side, write_gif, write_mp4

    workdir = os.path.abspath(workdir)
    config = run_config(workdir)
    camera_path(path, np.eye(4)[None], np.eye(3)[None], frames)  # validate --path/--frames before any work
    data = default_data_source() if data is None else data
    run, params, step = restore_params(config, workdir, step, model)
    context, key = find_scene(config, data, scene, eval_protocol(config, protocol))
    rgb, depth, alpha = render_path(run, params, context, path_views(context, path, frames), step)
    video = side_by_side(rgb, depth, alpha)
    stem = os.path.join(workdir, "videos", f"{_safe(key)}_{path}_step{step:07d}")
    out = dict(mp4=write_mp4(stem + ".mp4", video, fps=fps), gif=None, frames=video, scene=key, step=step)
    if gif:
        out["gif"] = write_gif(stem + ".gif", video, fps=min(fps, 25))
    if verbose:
        print(f"scene {key} @ step {step}: {frames} frames ({path}), RGB | depth")
        print(f"wrote {out['mp4']}" + (f" and {out['gif']}" if out["gif"] else ""))
    return out


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key))[:80]
