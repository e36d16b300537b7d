"""Train/eval iterators over the tiny synthetic dataset: shapes, determinism, resume, sharding,
padding, augmentation shared across views, protocol reports."""

import json

import numpy as np
import pytest

from dp_helpers import tiny_config
from data_pipelines import make_eval_iterator, make_train_iterator


def _same(b1, b2):
    for f in ("images", "intrinsics", "c2w", "index", "near", "far"):
        np.testing.assert_array_equal(getattr(b1.context, f), getattr(b2.context, f))
        np.testing.assert_array_equal(getattr(b1.target, f), getattr(b2.target, f))
    np.testing.assert_array_equal(b1.scene_id, b2.scene_id)


def test_train_batch_contract(synthetic_dir):
    it = make_train_iterator(tiny_config(synthetic_dir, sampler="boundedv2"), 0, 1)
    b = next(it)
    assert b.context.images.shape == (2, 6, 64, 64, 3) and b.target.images.shape == (2, 8, 64, 64, 3)
    assert b.context.images.dtype == np.float32 and 0 <= b.context.images.min() and b.context.images.max() <= 1
    assert b.context.near.shape == (2, 6) and np.all(b.context.near == 0.5) and np.all(b.target.far == 15.0)
    assert b.context.index.dtype == np.int32 and b.context.depth is None  # load_depth is off by default
    np.testing.assert_allclose(np.linalg.det(b.context.c2w[..., :3, :3]), 1.0, atol=1e-4)


def test_state_roundtrip_bit_identical(synthetic_dir):
    cfg = tiny_config(synthetic_dir, sampler="globalsplat", augment=True, prefetch=2, num_threads=2)
    it = make_train_iterator(cfg, 0, 1)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    expected = [next(it) for _ in range(2)]
    it2 = make_train_iterator(cfg, 0, 1)
    it2.set_state(state)
    for e in expected:
        got = next(it2)
        _same(e, got)
    with pytest.raises(ValueError, match="seed"):
        make_train_iterator(tiny_config(synthetic_dir), 0, 1).set_state(dict(state, seed=99))
    it.close()
    it2.close()


def test_augmentation_shared_across_views(synthetic_dir):
    it = make_train_iterator(tiny_config(synthetic_dir, sampler="tokengs", augment=True), 0, 1)
    b = next(it)
    K = np.concatenate([b.context.intrinsics, b.target.intrinsics], axis=1)
    for s in range(K.shape[0]):  # synthetic scenes have one K per scene: the crop must be shared
        np.testing.assert_allclose(K[s], np.broadcast_to(K[s, 0], K[s].shape), atol=1e-6)


def test_process_sharding(synthetic_dir):
    cfg = tiny_config(synthetic_dir)
    ids = []
    for p in range(2):
        it = make_train_iterator(cfg, p, 2)
        got = np.concatenate([next(it).scene_id for _ in range(4)])
        assert np.all(got % 2 == p)  # process p owns scenes p, p + 2, ...
        ids.append(got)
    with pytest.raises(ValueError, match="divisible"):
        make_train_iterator(cfg, 0, 3)


def test_eval_iterator_pads_and_is_deterministic(synthetic_dir):
    cfg = tiny_config(synthetic_dir, eval_batch_size=3, num_context_views=2, num_target_views=3)
    batches = list(make_eval_iterator(cfg, "synthetic"))
    assert len(batches) == 1
    batch, keys = batches[0]
    assert keys == ["synthetic_test_00000", "synthetic_test_00001", ""]
    np.testing.assert_array_equal(batch.scene_id, [0, 1, -1])
    assert batch.context.images.shape == (3, 2, 64, 64, 3) and batch.target.index.shape == (3, 3)
    again, _ = next(iter(make_eval_iterator(cfg, "synthetic")))
    _same(batch, again)
    # Two processes split the scenes and yield the same number of batches.
    parts = [list(make_eval_iterator(cfg, "synthetic", p, 2)) for p in range(2)]
    assert [k for _, ks in parts[0] for k in ks if k] == ["synthetic_test_00000"]
    assert [k for _, ks in parts[1] for k in ks if k] == ["synthetic_test_00001"]


def test_missing_scenes_are_counted(synthetic_dir, monkeypatch):
    from data_pipelines import protocols

    index = {"synthetic_test_00000": {"context": [0, 10], "target": [5]},
             "not_in_dataset": {"context": [0, 10], "target": [5]},
             "synthetic_test_00001": {"context": [0, 99], "target": [5, 6]},  # frame 99 does not exist
             "skipped_by_protocol": None}
    monkeypatch.setattr(protocols, "protocol_index", lambda p: index)
    monkeypatch.setitem(protocols.PROTOCOLS, "custom", protocols.Protocol("custom", "synthetic", "x.json", 2, ""))
    it = make_eval_iterator(tiny_config(synthetic_dir, eval_batch_size=1), "custom")
    r = it.report
    assert (r["missing_scenes"], r["missing_frames"], r["null_entries"], r["evaluated"]) == (1, 1, 1, 1)
    assert r["missing_scene_keys"] == ["not_in_dataset"] and r["missing_frame_keys"] == ["synthetic_test_00001"]


def test_too_short_scenes_are_counted_then_reported(synthetic_dir):
    from data_pipelines.samplers import SceneTooShort

    it = make_train_iterator(tiny_config(synthetic_dir, sampler="boundedv2", min_gap=70, max_gap=80, prefetch=0), 0, 1)
    it.sampler = type(it.sampler)(min_gap=70, max_gap=80, initial_min_gap=70, initial_max_gap=80)
    with pytest.raises(SceneTooShort, match="every training scene"):
        next(it)
    assert it.stats["skipped_too_short"] == 4
