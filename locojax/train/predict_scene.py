"""Predict the Gaussians of any built scene with a trained run (what `python -m experiments.predict` and
the viewer run): find the scene under a data directory, choose its context views, predict once,
render held-out frames and camera paths.

The run's own config fixes the model, the image size it was trained at (`config.data.image_shape`,
frames go through the same pixelSplat crop shim as in training) and the near / far planes of its
training dataset (the model has only ever seen those), unless `near` / `far` are given.

Default context (`nearest_in_pose_context`): the frame in the middle of the sequence is held out
and the run's context count of frames nearest to it in pose (camera-centre distance over the
scene's extent plus the viewing-angle difference in radians) are the context, the way evaluation
index files put their targets between the context views. Every non-context frame is held out and
scored.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from data_pipelines.registry import SEARCH_ORDER
from locojax.types import Gaussians, Views


@dataclasses.dataclass
class SceneRef:
    """Where a scene lives: dataset name, split, index in that split, its record and key."""
    dataset: str
    split: str
    index: int
    key: str
    record: dict
    num_frames: int


def list_scenes(data_dir: str, config=None, dataset: Optional[str] = None) -> list:
    """[(dataset, split, key)] of every built dataset under `data_dir` (test split first)."""
    from data_pipelines import datasets
    from data_pipelines.storage import SceneSource

    out = []
    for name in ([dataset] if dataset else SEARCH_ORDER):
        datasets.check_dataset(name)
        if name == "synthetic" and config is None:
            continue
        builder = datasets.make_builder(name, data_dir, config=config)
        if not datasets.is_prepared(builder):
            continue
        for split in ("test", "train"):
            if split in builder.info.splits:
                out += [(name, split, k) for k in SceneSource(builder, split).keys]
    return out


def find_scene(data_dir: str, key: str, config=None, dataset: Optional[str] = None) -> SceneRef:
    """The scene `key` in the first built dataset under `data_dir` that has it (or in `dataset`).

    Raises:
      ValueError: one line naming the data directory and the scenes it has.
    """
    from data_pipelines import datasets
    from data_pipelines.storage import SceneSource

    scenes = list_scenes(data_dir, config, dataset)
    for name, split, k in scenes:
        if k == key:
            source = SceneSource(datasets.make_builder(name, data_dir, config=config), split)
            i = source.index_of[key]
            return SceneRef(name, split, i, key, source.record(i), source.num_frames(i))
    shown = ", ".join(f"{k} ({n})" for n, _, k in scenes[:10]) + (" ..." if len(scenes) > 10 else "")
    raise ValueError(f"--data_dir={data_dir}: no scene {key!r}" + (f" in dataset {dataset!r}" if dataset else "")
                     + f"; it has: {shown or 'no built dataset'}")


def pose_distance(c2w: np.ndarray, ref: int) -> np.ndarray:
    """[N] distance of every camera to camera `ref`: centre distance over the scene's extent (mean
    distance of the centres from their mean) plus the angle between viewing directions (radians)."""
    c2w = np.asarray(c2w, np.float64)
    centres = c2w[:, :3, 3]
    extent = max(float(np.linalg.norm(centres - centres.mean(0), axis=-1).mean()), 1e-9)
    forward = c2w[:, :3, 2]
    cos = np.clip(forward @ forward[ref], -1.0, 1.0)
    return np.linalg.norm(centres - centres[ref], axis=-1) / extent + np.arccos(cos)


def nearest_in_pose_context(c2w: np.ndarray, num_context: int) -> list:
    """The `num_context` frames nearest in pose to the middle frame (which is held out), sorted."""
    n = len(c2w)
    if num_context >= n:
        raise ValueError(f"the scene has {n} frames; the run needs {num_context} context views and at least "
                         f"one frame is held out")
    mid = n // 2
    d = pose_distance(c2w, mid)
    d[mid] = np.inf
    return sorted(np.argsort(d, kind="stable")[:num_context].tolist())


def scene_views(ref: SceneRef, frames: Sequence[int], image_shape, near: float, far: float) -> Views:
    """Views [1, F, H, W, ...] of `frames` of the scene, through the training crop shim."""
    from data_pipelines import datasets
    from data_pipelines.views import prepare_views

    frames = np.asarray(frames, np.int64)
    pv = prepare_views(ref.record, frames, tuple(image_shape), pre_resize=datasets.PRE_RESIZE.get(ref.dataset))
    f = len(frames)
    return Views(images=pv.images[None], intrinsics=pv.intrinsics[None], c2w=pv.c2w[None],
                 near=np.full((1, f), near, np.float32), far=np.full((1, f), far, np.float32),
                 index=frames.astype(np.int32)[None])


@dataclasses.dataclass
class Predictor:
    """A restored run with jitted predict and one-camera render functions (each compiles once)."""
    config: object
    run: object
    params: object
    step: int
    near: float
    far: float

    def __post_init__(self):
        from locojax.train.step import cast_floats

        model, step = self.run.model, jnp.asarray(self.step, jnp.int32)
        self._predict = jax.jit(lambda p, c: cast_floats(
            model.predict(p, c, step=step, train=False, rng=jax.random.PRNGKey(0)).gaussians, jnp.float32))
        self._render = jax.jit(lambda g, v: self.run.render(g, v))

    @property
    def num_context(self) -> int:
        return int(self.config.data.num_context_views)

    @property
    def image_shape(self) -> tuple:
        return tuple(int(x) for x in self.config.data.image_shape)

    def predict(self, context: Views) -> Gaussians:
        """Gaussians [1, N, ...] (float32 numpy) of one scene's context Views [1, V, ...]."""
        return jax.tree_util.tree_map(np.asarray, self._predict(self.params, jax.tree_util.tree_map(jnp.asarray, context)))

    def render(self, gaussians: Gaussians, c2w: np.ndarray, K_norm: np.ndarray, image_shape=None):
        """(rgb [H, W, 3], depth [H, W], alpha [H, W]) of `gaussians` [1, N] seen by one camera."""
        h, w = image_shape or self.image_shape
        view = Views(images=np.zeros((1, 1, h, w, 3), np.float32), intrinsics=np.asarray(K_norm, np.float32)[None, None],
                     c2w=np.asarray(c2w, np.float32)[None, None], near=np.full((1, 1), self.near, np.float32),
                     far=np.full((1, 1), self.far, np.float32), index=np.full((1, 1), -1, np.int32))
        out = self._render(gaussians, jax.tree_util.tree_map(jnp.asarray, view))
        return (np.asarray(out.rgb[0, 0]), np.asarray(out.depth[0, 0, ..., 0]), np.asarray(out.alpha[0, 0, ..., 0]))


def load_predictor(workdir: str, step: Optional[int] = None, near: Optional[float] = None,
                   far: Optional[float] = None) -> Predictor:
    """Restore checkpoint `step` (default: the latest) of the run in `workdir` with the shared restore
    helper (`render_run.restore_params`: corrupt checkpoints are one line naming the step)."""
    from data_pipelines import datasets
    from locojax.train.render_run import restore_params, run_config

    config = run_config(workdir)
    run, params, step = restore_params(config, os.path.abspath(workdir), step)
    run_near, run_far = datasets.near_far(str(config.get("dataset", "synthetic") or "synthetic"), config)
    return Predictor(config, run, params, int(step), float(near if near is not None else run_near),
                     float(far if far is not None else run_far))


def predict_scene(workdir: str, data_dir: str, scene: str, *, context: Optional[Sequence[int]] = None,
                  dataset: Optional[str] = None, step: Optional[int] = None, path: str = "interpolate",
                  frames: int = 60, fps: int = 24, max_held_out: int = 32, out_dir: Optional[str] = None,
                  near: Optional[float] = None, far: Optional[float] = None, lpips: Optional[bool] = None,
                  verbose: bool = True) -> dict:
    """Predict scene `scene` under `data_dir` with the run in `workdir` and write, under `out_dir`
    (default `workdir/predict/<dataset>_<scene>_step<N>/`): `gaussians.ply` (INRIA layout: scales,
    rotations, opacities, SH), `<path>.mp4` (RGB | depth along the camera path through the context
    cameras, or an orbit), and `metrics.json` (PSNR / SSIM, LPIPS when asked or when the run's
    evaluation uses it, per held-out frame and their mean; up to `max_held_out` frames, evenly spread).

    Returns the metrics dict plus the paths written ("ply", "video", "metrics").
    """
    import json

    from locojax import metrics as M
    from locojax.io.ply import write_ply
    from locojax.io.video import side_by_side, write_mp4
    from locojax.render.camera_path import camera_path

    camera_path(path, np.eye(4)[None], np.eye(3)[None], frames)  # validate --path / --frames first
    predictor = load_predictor(workdir, step, near, far)
    ref = find_scene(data_dir, scene, predictor.config, dataset)
    all_c2w = np.asarray(ref.record["c2w"], np.float64)
    n = ref.num_frames
    if context is None:
        context = nearest_in_pose_context(all_c2w, predictor.num_context)
    context = [int(c) for c in context]
    bad = [c for c in context if not 0 <= c < n]
    if bad or len(set(context)) != len(context) or not context:
        raise ValueError(f"--context={','.join(map(str, context))}: frames must be distinct and in 0..{n - 1} "
                         f"(scene {scene!r} has {n} frames)")
    held_out = [i for i in range(n) if i not in set(context)]
    if len(held_out) > max_held_out:
        held_out = [held_out[int(round(k))] for k in np.linspace(0, len(held_out) - 1, max_held_out)]
    ctx_views = scene_views(ref, context, predictor.image_shape, predictor.near, predictor.far)
    gaussians = predictor.predict(ctx_views)
    out_dir = out_dir or os.path.join(os.path.abspath(workdir), "predict",
                                      f"{ref.dataset}_{_safe(scene)}_step{predictor.step:07d}")
    os.makedirs(out_dir, exist_ok=True)
    ply = os.path.join(out_dir, "gaussians.ply")
    write_ply(ply, jax.tree_util.tree_map(lambda x: x[0], gaussians))

    use_lpips = bool(predictor.config.eval.get("lpips", False)) if lpips is None else bool(lpips)
    per_frame = []
    if held_out:
        targets = scene_views(ref, held_out, predictor.image_shape, predictor.near, predictor.far)
        preds = np.stack([predictor.render(gaussians, targets.c2w[0, k], targets.intrinsics[0, k])[0]
                          for k in range(len(held_out))])
        preds = np.clip(preds, 0.0, 1.0)
        truth = targets.images[0]
        psnr = np.asarray(M.psnr(jnp.asarray(preds), jnp.asarray(truth)))
        ssim = np.asarray(M.ssim(jnp.asarray(preds), jnp.asarray(truth)))
        lp = np.asarray(M.lpips(jnp.asarray(preds), jnp.asarray(truth))) if use_lpips else np.full(len(held_out), np.nan)
        per_frame = [dict(frame=int(f), psnr=float(p), ssim=float(s), lpips=None if np.isnan(v) else float(v))
                     for f, p, s, v in zip(held_out, psnr, ssim, lp)]

    path_c2w, path_K = camera_path(path, ctx_views.c2w[0], ctx_views.intrinsics[0], frames)
    rendered = [predictor.render(gaussians, path_c2w[i], path_K[i]) for i in range(frames)]
    video = side_by_side(np.stack([r[0] for r in rendered]), np.stack([r[1] for r in rendered]),
                         np.stack([r[2] for r in rendered]))
    mp4 = write_mp4(os.path.join(out_dir, f"{path}.mp4"), video, fps=fps)

    mean = lambda k: (float(np.mean([r[k] for r in per_frame])) if per_frame and per_frame[0][k] is not None  # noqa: E731
                      else None)
    result = dict(scene=scene, dataset=ref.dataset, split=ref.split, step=predictor.step, context=context,
                  held_out=held_out, num_gaussians=int(gaussians.means.shape[1]), near=predictor.near,
                  far=predictor.far, image_shape=list(predictor.image_shape),
                  psnr=mean("psnr"), ssim=mean("ssim"), lpips=mean("lpips"), per_frame=per_frame)
    metrics_path = os.path.join(out_dir, "metrics.json")
    with open(metrics_path, "w") as f:
        json.dump(result, f, indent=1)
    result.update(ply=ply, video=mp4, metrics=metrics_path, frames=video)
    if verbose:
        score = (f"held-out PSNR {result['psnr']:.2f} dB, SSIM {result['ssim']:.3f} over {len(held_out)} frames"
                 if per_frame else "no held-out frames")
        print(f"scene {scene} ({ref.dataset}) @ step {predictor.step}: context {context}; {score}")
        print(f"wrote {ply}, {mp4}, {metrics_path}")
    return result


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key))[:80]
