"""GlobalSplat's consistency-loss subsets, formed by the model from the context frame indices
(appendix 0.B.3; official `make_anchor_alternating_input_subsets_and_shared_targets`)."""

import jax.numpy as jnp
import numpy as np

from locojax.models.globalsplat.subsets import interleaved_subsets, subset_size


def test_thirteen_views_anchor_and_alternate():
    index = jnp.arange(13, dtype=jnp.int32)[None] * 7  # sorted frame indices
    sub = np.asarray(interleaved_subsets(index, False))[0]
    assert sub.shape == (2, subset_size(13)) == (2, 8)
    a, b = set(sub[0].tolist()), set(sub[1].tolist())
    assert a & b == {0, 12} and a | b == set(range(13))  # both hold the two anchors
    assert a - {0, 12} == {1, 3, 5, 7, 9, 11} and b - {0, 12} == {2, 4, 6, 8, 10}
    assert sub[1, -1] == 12  # the shorter subset repeats its end anchor
    np.testing.assert_array_equal(np.asarray(interleaved_subsets(index, True))[0], sub[::-1])  # odd steps swap


def test_subsets_follow_frame_order_not_input_order():
    frames = np.array([[50, 10, 40, 20, 30]], np.int32)  # input order differs from time order
    sub = np.asarray(interleaved_subsets(jnp.asarray(frames), False))[0]
    # time order: 10 (view 1), 20 (3), 30 (4), 40 (2), 50 (0); anchors are views 1 and 0
    assert frames[0, sub[0]].tolist() == [10, 20, 40, 50] and frames[0, sub[1]].tolist() == [10, 30, 50, 50]
