"""Worker threads of the training iterator (`config.data.num_threads`, used by `benchmark data` to
feed more accelerators from one host) leave every batch a function of the step alone: the same
batches with 0, 1 or 3 workers and any prefetch depth, also after a resume mid-stream."""

import numpy as np
import pytest

from dp_helpers import tiny_config
from data_pipelines import make_train_iterator


def _batches(cfg, n, start_state=None):
    it = make_train_iterator(cfg, 0, 1)
    if start_state is not None:
        it.set_state(start_state)
    try:
        return [next(it) for _ in range(n)], it.get_state()
    finally:
        it.close()


def _assert_same(a, b):
    for f in ("images", "intrinsics", "c2w", "index"):
        np.testing.assert_array_equal(getattr(a.context, f), getattr(b.context, f))
        np.testing.assert_array_equal(getattr(a.target, f), getattr(b.target, f))
    np.testing.assert_array_equal(a.scene_id, b.scene_id)


@pytest.mark.parametrize("sampler", ["boundedv2", "tokengs"])
def test_batches_do_not_depend_on_the_number_of_workers(synthetic_dir, sampler):
    kw = dict(sampler=sampler, augment=True, reflect_prob=0.5)
    serial, _ = _batches(tiny_config(synthetic_dir, prefetch=0, **kw), 5)
    for threads, prefetch in ((1, 2), (3, 6)):
        cfg = tiny_config(synthetic_dir, prefetch=prefetch, num_threads=threads, **kw)
        got, _ = _batches(cfg, 5)
        for a, b in zip(serial, got):
            _assert_same(a, b)
        # resumed at step 2 with workers: the serial stream's batches 2..4
        _, state = _batches(cfg, 2)
        resumed, _ = _batches(cfg, 3, state)
        for a, b in zip(serial[2:], resumed):
            _assert_same(a, b)
    assert not all(np.array_equal(serial[0].scene_id, b.scene_id) for b in serial[1:])  # batches differ
