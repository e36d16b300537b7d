"""Batch iterators of the Data contract (data_pipelines/CONTRACT.md).

Design: plain numpy over a TFDS array_record data source (random access), so every batch is a pure
function of (seed, process_index, step): `get_state()` is just the step counter and `set_state()`
resumes bit-identically (a background thread prefetches the next batches by step number).

Training: process p of P owns scenes p, p + P, p + 2P, ... of the train split; sample j of the
process (j = step * B + b) uses scene perm_e[j mod n] with perm_e a seeded permutation per epoch
e = j // n, and a sampler rng seeded by (seed, p, j). A scene too short for the sampler is skipped
deterministically (the next scene of the permutation is used) and counted in `stats`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
from typing import Optional

import numpy as np

from locojax.types import Batch, Views

from data_pipelines import augment as aug
from data_pipelines import datasets, protocols
from data_pipelines.config import DataConfig
from data_pipelines.errors import NoEvaluableScenesError
from data_pipelines.loading import open_split
from data_pipelines.registry import make_sampler, spec
from data_pipelines.samplers import SceneTooShort
from data_pipelines.scene_frame import apply_scene_frame, check_scene_frame
from data_pipelines.storage import _text
from data_pipelines.views import prepare_views

log = logging.getLogger(__name__)
_STATE_VERSION = 1


def _views(images, intrinsics, c2w, near, far, index, depth=None) -> Views:
    shape = index.shape
    return Views(images=images, intrinsics=intrinsics, c2w=c2w,
                 near=np.full(shape, near, np.float32), far=np.full(shape, far, np.float32),
                 index=index.astype(np.int32), depth=depth)


def _per_process(total: int, process_count: int, what: str) -> int:
    if process_count < 1 or total % process_count:
        raise ValueError(f"{what}={total} is not divisible by process_count={process_count}")
    return total // process_count


class TrainIterator:
    """Infinite iterator of training `Batch`es (numpy). See module docstring for determinism."""

    def __init__(self, config, process_index: int = 0, process_count: int = 1):
        data = DataConfig.parse(config)
        self.spec = spec(data.dataset)
        self.dataset = self.spec.name
        self.seed = data.seed
        self.batch_size = _per_process(data.batch_size, process_count, "config.batch_size")
        if not 0 <= process_index < process_count:
            raise ValueError(f"process_index={process_index} not in [0, {process_count})")
        self.process_index, self.process_count = process_index, process_count
        self.image_shape = data.image_shape
        self.augment = data.augment
        self.reflect_prob = data.reflect_prob
        if not 0.0 <= self.reflect_prob <= 1.0:
            raise ValueError(f"config.data.reflect_prob={self.reflect_prob} is not a probability in [0, 1]")
        self.scene_frame = check_scene_frame(data.scene_frame)
        self.principal_point_crop = data.principal_point_crop
        self.load_depth = data.load_depth
        self.near, self.far = datasets.near_far(self.dataset, data)
        self.sampler = make_sampler(data.sampler, dataset=self.dataset, num_context_views=data.num_context_views,
                                    num_target_views=data.num_target_views, min_gap=data.min_gap,
                                    max_gap=data.max_gap)
        self.source = open_split(self.dataset, "train", config=data)
        self.shard = np.arange(process_index, len(self.source), process_count)
        if len(self.shard) == 0:
            raise ValueError(f"process {process_index}/{process_count} has no training scenes "
                             f"({len(self.source)} in {self.dataset}/train)")
        self.stats = {"skipped_too_short": 0}
        self._step = 0
        self._prefetch = data.prefetch
        threads = max(1, data.num_threads)
        # Batches are pure functions of the step, so several can be built concurrently (PIL and numpy
        # release the GIL in decoding/resizing/array maths).
        self._pool = concurrent.futures.ThreadPoolExecutor(threads) if self._prefetch > 0 else None
        self._pending: dict[int, concurrent.futures.Future] = {}

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict:
        return {"version": _STATE_VERSION, "step": int(self._step), "seed": self.seed,
                "dataset": self.dataset, "process_index": self.process_index,
                "process_count": self.process_count, "num_scenes": int(len(self.source))}

    def set_state(self, state: dict) -> None:
        for key in ("seed", "dataset", "process_index", "process_count", "num_scenes"):
            mine = self.get_state()[key]
            if key in state and state[key] != mine:
                raise ValueError(f"iterator state has {key}={state[key]!r} but this iterator has {mine!r}")
        self._step = int(state["step"])
        self._pending.clear()

    # -- batches -------------------------------------------------------------------------------
    def _scene_for(self, j: int, attempt: int) -> int:
        n = len(self.shard)
        k = j + attempt
        perm = np.random.default_rng([self.seed, self.process_index, k // n, 17]).permutation(n)
        return int(self.shard[perm[k % n]])

    def _sample(self, j: int, step: int):
        for attempt in range(len(self.shard)):
            scene = self._scene_for(j, attempt)
            record = self.source.record(scene)
            rng = np.random.default_rng([self.seed, self.process_index, j, attempt, 23])
            try:
                sel = self.sampler.sample(rng, len(record["images"]), step)
            except SceneTooShort as e:
                self.stats["skipped_too_short"] += 1
                log.warning("train sample %d: scene %r skipped: %s", j, _text(record["key"]), e)
                continue
            params = aug.sample_params(rng) if self.augment else None
            frames = np.concatenate([sel.context, sel.target])
            views = prepare_views(record, frames, self.image_shape, params, self.spec.pre_resize,
                                  self.principal_point_crop, with_depth=self.load_depth)
            if self.reflect_prob > 0 and rng.random() < self.reflect_prob:
                views = views._replace(**dict(zip(("images", "intrinsics", "c2w", "depth"), aug.reflect_views(
                    views.images, views.intrinsics, views.c2w, views.depth))))
            return scene, sel, views
        raise SceneTooShort(f"every training scene of {self.dataset} is too short for sampler {self.sampler.name}")

    def make_batch(self, step: int) -> Batch:
        """The batch at `step` (pure function of seed, process and step)."""
        samples = [self._sample(step * self.batch_size + b, step) for b in range(self.batch_size)]
        c = len(samples[0][1].context)
        ctx_idx = np.stack([s[1].context for s in samples])
        tgt_idx = np.stack([s[1].target for s in samples])
        images = np.stack([s[2].images for s in samples])
        K = np.stack([s[2].intrinsics for s in samples])
        c2w = np.stack([s[2].c2w for s in samples])
        depth = np.stack([s[2].depth for s in samples]) if self.load_depth else None
        part = lambda x, sl: None if x is None else x[:, sl]  # noqa: E731
        ctx, tgt = slice(None, c), slice(c, None)
        return apply_scene_frame(Batch(
            context=_views(images[:, ctx], K[:, ctx], c2w[:, ctx], self.near, self.far, ctx_idx, part(depth, ctx)),
            target=_views(images[:, tgt], K[:, tgt], c2w[:, tgt], self.near, self.far, tgt_idx, part(depth, tgt)),
            scene_id=np.array([s[0] for s in samples], np.int32),
        ), self.scene_frame)

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        step = self._step
        if self._pool is None:
            batch = self.make_batch(step)
        else:
            for s in range(step, step + self._prefetch + 1):
                if s not in self._pending:
                    self._pending[s] = self._pool.submit(self.make_batch, s)
            batch = self._pending.pop(step).result()
            for s in [s for s in self._pending if s < step]:
                self._pending.pop(s)
        self._step = step + 1
        return batch

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def make_train_iterator(config, process_index: int = 0, process_count: int = 1) -> TrainIterator:
    return TrainIterator(DataConfig.parse(config), process_index, process_count)


class EvalIterator:
    """Finite iterator of (Batch, keys) over an evaluation protocol; the last batch is padded
    (scene_id -1, key ""). Target views padded to the protocol's largest count have index -1.

    Missing scenes (in the index but not in the dataset) and entries whose frames do not exist are
    counted in `report` and logged at construction, never silently dropped.
    """

    def __init__(self, config, protocol: str, process_index: int = 0, process_count: int = 1):
        data = DataConfig.parse(config)
        self.protocol = protocols.get_protocol(protocol)
        self.spec = spec(self.protocol.dataset)
        self.dataset = self.spec.name
        self.image_shape = data.image_shape
        self.load_depth = data.load_depth
        self.near, self.far = datasets.near_far(self.dataset, data)
        self.scene_frame = check_scene_frame(data.scene_frame)
        eval_bs = data.eval_batch_size
        self.batch_size = eval_bs if eval_bs else _per_process(data.batch_size, process_count, "config.batch_size")
        self.source = open_split(self.dataset, "test", config=data)
        self._eval_key = self.spec.eval_key_function()
        index = self._index(data)
        entries, missing_scenes, bad_frames, null = [], [], [], 0
        for key, entry in index.items():
            if entry is None:
                null += 1
                continue
            scene = self.scene_key(key)
            if scene not in self.source.index_of:
                missing_scenes.append(key)
                continue
            entries.append((key, scene, np.asarray(entry["context"], np.int32), np.asarray(entry["target"], np.int32)))
        limit = data.eval_num_scenes
        if limit is not None:
            entries = entries[:limit]
        # Frame range check needs the records; done for the kept entries only.
        checked = []
        for key, scene, ctx, tgt in entries:
            n = self.source.num_frames(self.source.index_of[scene])
            if max(ctx.max(), tgt.max()) >= n or min(ctx.min(), tgt.min()) < 0:
                bad_frames.append(key)
            else:
                checked.append((key, scene, ctx, tgt))
        entries = checked
        sizes = {len(c) for _, _, c, _ in entries}
        if len(sizes) > 1:
            raise ValueError(f"protocol {protocol}: entries have different context counts {sorted(sizes)}")
        self.report = {"protocol": protocol, "index_entries": len(index), "null_entries": null,
                       "missing_scenes": len(missing_scenes), "missing_frames": len(bad_frames),
                       "evaluated": len(entries), "missing_scene_keys": missing_scenes[:20],
                       "missing_frame_keys": bad_frames[:20]}
        if missing_scenes or bad_frames:
            log.warning("eval protocol %s: %d scenes missing from %s/test, %d entries with missing frames "
                        "(of %d non-null entries); e.g. %s", protocol, len(missing_scenes), self.dataset,
                        len(bad_frames), len(index) - null, (missing_scenes + bad_frames)[:5])
        if not entries:
            raise NoEvaluableScenesError(f"protocol {protocol}: no evaluable scenes in the {self.dataset} test split "
                                         f"({self.report})")
        self.num_targets = max(len(t) for _, _, _, t in entries)
        per_process = math.ceil(len(entries) / process_count)
        self.entries = entries[process_index * per_process:(process_index + 1) * per_process]
        self.num_batches = math.ceil(per_process / self.batch_size)

    def scene_key(self, index_key: str) -> str:
        """Dataset key of an index key (`DatasetSpec.eval_key`: ScanNet indices name "<scene>_<k>"
        sub-sequences)."""
        if self._eval_key is not None and index_key not in self.source.index_of:
            return self._eval_key(index_key)
        return index_key

    def _index(self, data: DataConfig) -> dict:
        if not self.protocol.from_dataset:
            return protocols.protocol_index(self.protocol)
        sampler = make_sampler(data.sampler, dataset=self.dataset)
        c = int(data.num_context_views or sampler.num_context_views)
        t = int(data.num_target_views or min(sampler.num_target_views, 8))
        frames = [self.source.num_frames(i) for i in range(len(self.source))]
        return protocols.synthetic_index(self.source.keys, frames, c, t)

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self):
        for b in range(self.num_batches):
            chunk = self.entries[b * self.batch_size:(b + 1) * self.batch_size]
            real = len(chunk)
            fill = chunk[0] if chunk else self.entries[0] if self.entries else None
            rows = chunk + [fill] * (self.batch_size - real)
            imgs_c, K_c, P_c, imgs_t, K_t, P_t, idx_c, idx_t = [], [], [], [], [], [], [], []
            d_c, d_t = [], []
            for key, scene, ctx, tgt in rows:
                record = self.source.record(self.source.index_of[scene])
                pad = self.num_targets - len(tgt)
                tgt_frames = np.concatenate([tgt, np.repeat(tgt[-1:], pad)])
                images, K, c2w, depth = prepare_views(record, np.concatenate([ctx, tgt_frames]), self.image_shape,
                                                      pre_resize=self.spec.pre_resize,
                                                      with_depth=self.load_depth)
                c = len(ctx)
                if depth is not None:
                    d_c.append(depth[:c]); d_t.append(depth[c:])  # noqa: E702
                imgs_c.append(images[:c]); K_c.append(K[:c]); P_c.append(c2w[:c])
                imgs_t.append(images[c:]); K_t.append(K[c:]); P_t.append(c2w[c:])
                idx_c.append(ctx)
                idx_t.append(np.concatenate([tgt, np.full(pad, -1, np.int32)]))
            scene_id = [self.source.index_of[s] for _, s, _, _ in chunk] + [-1] * (self.batch_size - real)
            stack = lambda xs: np.stack(xs) if xs else None  # noqa: E731
            batch = Batch(
                context=_views(np.stack(imgs_c), np.stack(K_c), np.stack(P_c), self.near, self.far, np.stack(idx_c),
                               stack(d_c)),
                target=_views(np.stack(imgs_t), np.stack(K_t), np.stack(P_t), self.near, self.far, np.stack(idx_t),
                              stack(d_t)),
                scene_id=np.array(scene_id, np.int32))
            batch = apply_scene_frame(batch, self.scene_frame)
            yield batch, [k for k, _, _, _ in chunk] + [""] * (self.batch_size - real)


def make_eval_iterator(config, protocol: Optional[str] = None, process_index: int = 0, process_count: int = 1) -> EvalIterator:
    """Finite (Batch, keys) iterator; protocol None -> config.data.eval_protocol."""
    data = DataConfig.parse(config)
    return EvalIterator(data, protocol or data.eval_protocol, process_index, process_count)
