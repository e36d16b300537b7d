"""Invariants of the training samplers (VolSplat boundedv2, GlobalSplat, TokenGS)."""

import numpy as np
import pytest

from data_pipelines.registry import make_sampler
from data_pipelines.samplers import SceneTooShort


def _draws(sampler, n_frames, step, count=300, seed=0):
    rng = np.random.default_rng(seed)
    return [sampler.sample(rng, n_frames, step) for _ in range(count)]


def test_boundedv2_gap_warm_up_and_targets_between():
    s = make_sampler("boundedv2")
    assert (s.num_context_views, s.num_target_views) == (6, 8)
    assert s.gap_bounds(0) == (15, 30) and s.gap_bounds(1000) == (20, 50) and s.gap_bounds(10**6) == (20, 50)
    assert s.gap_bounds(500) == (17, 40)  # upstream int((final - initial) * fraction)
    for step, (lo, hi) in ((0, (15, 30)), (5000, (20, 50))):
        gaps = []
        for v in _draws(s, 300, step):
            ctx, tgt = v.context, v.target
            assert len(ctx) == 6 and len(tgt) == 8 and len(set(ctx.tolist())) == 6
            assert np.all(np.diff(ctx) > 0)
            assert tgt.min() >= ctx[0] and tgt.max() <= ctx[-1]
            gaps.append(ctx[-1] - ctx[0])
        assert min(gaps) >= lo and max(gaps) <= hi and max(gaps) - min(gaps) > (hi - lo) // 2
    # Short scene: gap clamped to N - 1.
    for v in _draws(s, 25, 5000, count=50):
        assert v.context[-1] - v.context[0] <= 24
    with pytest.raises(SceneTooShort):
        s.sample(np.random.default_rng(0), 12, 5000)


def test_globalsplat_window():
    s = make_sampler("globalsplat")
    assert (s.num_context_views, s.num_target_views) == (13, 12)
    spans = []
    for v in _draws(s, 400, 0):
        frames = np.concatenate([v.context, v.target])
        assert len(set(frames.tolist())) == 25
        assert v.context[0] == frames.min() and v.context[-1] == frames.max()  # anchors = window ends
        assert np.all(np.diff(v.context) > 0)
        spans.append(frames.max() - frames.min())
    assert min(spans) >= 40 and max(spans) <= 220 and max(spans) > 150
    for v in _draws(s, 64, 0, count=50):
        assert v.context[-1] - v.context[0] <= 63
    with pytest.raises(SceneTooShort):
        s.sample(np.random.default_rng(0), 20, 0)


def test_tokengs_views():
    s = make_sampler("tokengs")
    assert (s.num_context_views, s.num_target_views) == (2, 6)
    d = make_sampler("tokengs", dataset="dl3dv")
    assert (d.num_context_views, d.num_target_views) == (4, 4)
    for sampler in (s, d):
        for v in _draws(sampler, 200, 0):
            gap = v.context[-1] - v.context[0]
            assert 10 <= gap <= 40 and np.all(np.diff(v.context) > 0)
            assert len(set(v.target.tolist())) == len(v.target)
            assert v.target.min() >= v.context[0] and v.target.max() <= v.context[-1]


def test_unknown_sampler_named():
    with pytest.raises(ValueError, match="config.data.sampler='nope'"):
        make_sampler("nope")
