"""A minimal batch source with the data contract's interface (data_pipelines/CONTRACT.md) for trainer tests:
random posed views of scenes whose colour is a per-scene constant plus a per-view gradient, so
that the toy model can learn something. Deterministic in (seed, scene index)."""

from __future__ import annotations

import numpy as np

from locojax.types import Batch, Views


def _look_at(position):
    z = -position / np.linalg.norm(position)  # forward, towards the origin
    x = np.cross(z, np.array([0.0, 1.0, 0.0]))
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    c2w = np.eye(4)
    c2w[:3, :3] = np.stack([x, y, z], axis=1)
    c2w[:3, 3] = position
    return c2w


def make_scene_views(rng, num_views: int, image_shape, color):
    h, w = image_shape
    angles = rng.uniform(-0.6, 0.6, size=(num_views, 2))
    c2w, images = [], []
    for a, e in angles:
        pos = 2.5 * np.array([np.sin(a) * np.cos(e), np.sin(e), -np.cos(a) * np.cos(e)])
        c2w.append(_look_at(pos))
        ramp = np.linspace(-0.1, 0.1, w)[None, :, None] * np.sign(a)
        images.append(np.clip(color[None, None, :] + ramp + np.zeros((h, w, 3)), 0, 1))
    k = np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]])
    return Views(
        images=np.asarray(images, np.float32),
        intrinsics=np.repeat(k[None], num_views, 0).astype(np.float32),
        c2w=np.asarray(c2w, np.float32),
        near=np.full((num_views,), 0.5, np.float32),
        far=np.full((num_views,), 10.0, np.float32),
        index=np.arange(num_views, dtype=np.int32),
    )


def make_batch(seed: int, scene_indices, config) -> Batch:
    d = config.data
    ctx, tgt, ids = [], [], []
    for i in scene_indices:
        rng = np.random.default_rng([seed, int(i)])
        color = rng.uniform(0.2, 0.8, size=3)
        ctx.append(make_scene_views(rng, int(d.num_context_views), tuple(d.image_shape), color))
        tgt.append(make_scene_views(rng, int(d.num_target_views), tuple(d.image_shape), color))
        ids.append(i)
    stack = lambda vs: Views(*[np.stack([getattr(v, f) for v in vs]) for f in  # noqa: E731
                              ("images", "intrinsics", "c2w", "near", "far", "index")])
    return Batch(context=stack(ctx), target=stack(tgt), scene_id=np.asarray(ids, np.int32))


class ToyTrainIterator:
    """Infinite; batch k of process p holds scenes (k * batch_size + p * local + j) for j < local."""

    def __init__(self, config, process_index=0, process_count=1):
        self.config = config
        self.local = int(config.batch_size) // process_count
        self.offset = process_index * self.local
        self.position = 0
        self.seed = int(config.seed)

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        base = self.position * int(self.config.batch_size) + self.offset
        self.position += 1
        n = int(self.config.data.get("synthetic_num_train_scenes", 64))
        return make_batch(self.seed, [(base + j) % n for j in range(self.local)], self.config)

    def get_state(self) -> dict:
        return {"position": self.position}

    def set_state(self, state: dict) -> None:
        self.position = int(state["position"])


def make_train_iterator(config, process_index=0, process_count=1):
    return ToyTrainIterator(config, process_index, process_count)


def make_eval_iterator(config, protocol="synthetic", process_index=0, process_count=1):
    n = int(config.data.get("eval_num_scenes") or 3)
    gbs = int(config.batch_size)
    local = gbs // process_count
    for start in range(0, n, gbs):
        idx = [start + process_index * local + j for j in range(local)]
        batch = make_batch(10_000 + int(config.seed), [i if i < n else 0 for i in idx], config)
        batch = batch.replace(scene_id=np.asarray([i if i < n else -1 for i in idx], np.int32))
        yield batch, [f"toy{i:03d}" if i < n else "" for i in idx]
