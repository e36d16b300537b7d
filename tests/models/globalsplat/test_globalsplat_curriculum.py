"""Merge rules and schedule of the coarse-to-fine curriculum (appendix eqs. 26-35)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from locojax.models.globalsplat import curriculum as cc
from locojax.models.globalsplat.decoder import Candidates, decode_padded, decode_stage

M = 16


def random_candidates(seed=0, b=2, p=3, identical=False):
    rng = np.random.default_rng(seed)
    shape = lambda d: (b, p, 1 if identical else M, d)  # noqa: E731
    def draw(d, scale=1.0, offset=0.0):
        x = rng.normal(offset, scale, shape(d)).astype(np.float32)
        return jnp.asarray(np.broadcast_to(x, (b, p, M, d)).copy())
    return Candidates(pos=draw(3), log_scale=draw(3, 0.5, -3.5), rot6=draw(6, 0.3), opacity=draw(1, 1.5),
                      gate=jnp.asarray(rng.normal(0, 1, (b, p, M, 1)).astype(np.float32)), sh=draw(48))


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_weights(gate, groups):
    g = np.asarray(gate, np.float64).reshape(gate.shape[0], gate.shape[1], groups, -1)
    e = np.exp(g - g.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)  # [B, P, G, b]


@pytest.mark.parametrize("stage", [0, 1, 2, 3, 4])
def test_identical_candidates_merge_to_themselves(stage):
    cand = random_candidates(identical=True)
    dec = decode_stage(cand, stage, 1.0)
    bs = M >> stage
    np.testing.assert_allclose(dec.means, np.broadcast_to(np.asarray(cand.pos[:, :, :1]) + [0, 0, 1.5],
                                                          dec.means.shape), atol=1e-5)
    np.testing.assert_allclose(dec.sh.reshape(*dec.sh.shape[:3], -1), np.asarray(cand.sh[:, :, :1]).repeat(1 << stage, 2),
                               atol=1e-5)
    # documented correction (eq. 30): the merged log-scale is log s + log(b) / 3 per axis
    log_s = np.clip(np.asarray(cand.log_scale[:, :, :1]), math.log(1e-4) - 1, math.log(0.05) + 2)
    np.testing.assert_allclose(np.log(dec.scales), np.broadcast_to(log_s + math.log(bs) / 3, dec.scales.shape),
                               atol=1e-5)
    alpha = np_sigmoid(np.clip(np.asarray(cand.opacity[:, :, :1]), -13, 6))
    np.testing.assert_allclose(dec.opacities, np.broadcast_to(np.minimum(alpha, 0.99), dec.opacities.shape),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("groups", [1, 2, 4, 8])
def test_opacity_merge_is_eq33(groups):
    cand = random_candidates(seed=3)
    w = cc.gate_weights(cand.gate, groups)
    merged = np.asarray(jax.nn.sigmoid(cc.merge_opacity_logits(cand.opacity, w)))[..., 0]
    alpha = np_sigmoid(np.asarray(cand.opacity, np.float64))[..., 0].reshape(2, 3, groups, -1)
    expected = 1.0 - np.exp(np.sum(np_weights(cand.gate, groups) * np.log1p(-alpha), axis=-1))
    np.testing.assert_allclose(merged, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_transition_endpoints_equal_neighbouring_stages(stage):
    cand = random_candidates(seed=stage)
    at_one = decode_stage(cand, stage, 1.0)
    at_zero = decode_stage(cand, stage, 0.0)
    # lambda = 1 is the stage itself: compare with an independent weighted mean of the candidates
    w = np_weights(cand.gate, 1 << stage)[..., None]
    pos = np.sum(w * np.asarray(cand.pos).reshape(2, 3, 1 << stage, -1, 3), axis=3) + [0, 0, 1.5]
    np.testing.assert_allclose(at_one.means, pos, atol=1e-5)
    # lambda = 0 is the previous stage, each Gaussian split in two (eqs. 29, 31, 34)
    prev = decode_stage(cand, stage - 1, 1.0)
    rep = lambda x: np.repeat(np.asarray(x), 2, axis=2)  # noqa: E731
    np.testing.assert_allclose(at_zero.means, rep(prev.means), atol=1e-6)
    np.testing.assert_allclose(at_zero.rot6d, rep(prev.rot6d), atol=1e-6)
    np.testing.assert_allclose(at_zero.sh, rep(prev.sh), atol=1e-6)
    np.testing.assert_allclose(at_zero.scales, rep(prev.scales) * 2 ** (-1 / 3), rtol=1e-5)
    # opacity: the official code also shifts every candidate logit by -(1 - lambda) log 2
    shifted = np.clip(np.asarray(cand.opacity, np.float64) - math.log(2), -13, 6)[..., 0]
    a = np_sigmoid(shifted).reshape(2, 3, 1 << (stage - 1), -1)
    parent = 1.0 - np.exp(np.sum(np_weights(cand.gate, 1 << (stage - 1)) * np.log1p(-a), axis=-1))
    child = 1.0 - np.sqrt(1.0 - parent)  # two children composite to the parent's alpha
    np.testing.assert_allclose(at_zero.opacities[..., 0], np.repeat(child, 2, axis=2), rtol=1e-4, atol=1e-7)


def test_schedule_matches_table():
    steps = [0, 9_999, 10_000, 11_000, 12_000, 19_999, 20_000, 50_000, 51_000, 200_000]
    want = [(0, 1), (0, 1), (1, 0), (1, 0.5), (1, 1), (1, 1), (2, 0), (3, 0), (3, 0.5), (3, 1)]
    fn = jax.jit(lambda s: cc.stage_and_mix(s, (10_000, 20_000, 50_000, 80_000), 2_000, final_stage=3))
    for step, (stage, mix) in zip(steps, want):
        s, m = fn(step)
        assert (int(s), float(m)) == (stage, pytest.approx(mix)), step


def test_padded_stages_keep_full_capacity_shape():
    cand = random_candidates(seed=7)
    for stage in range(4):
        pad = decode_padded(cand, jnp.int32(stage), jnp.float32(1.0), final_stage=3)
        ref = decode_stage(cand, stage, 1.0)
        assert pad.means.shape == (2, 3, 8, 3)
        k = 8 >> stage
        np.testing.assert_allclose(pad.means[:, :, ::k], ref.means, atol=1e-6)
        np.testing.assert_allclose(pad.opacities[:, :, ::k], ref.opacities, atol=1e-7)
        assert int(pad.active.sum()) == 2 * 3 * (1 << stage)
        assert float(jnp.abs(jnp.where(pad.active[..., None], 0.0, pad.opacities)).max()) == 0.0
