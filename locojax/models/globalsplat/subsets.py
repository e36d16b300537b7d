"""The two interleaved context subsets of the consistency loss (appendix 0.B.3; official
`make_anchor_alternating_input_subsets_and_shared_targets`).

Context views are ordered by frame index; both subsets hold the first and last (anchor) views;
the intermediate views alternate between them (A: 1st, 3rd, ... intermediate; B: 2nd, 4th, ...;
swapped when `flip`, which the official trainer does on odd steps). With an odd number of
intermediates the shorter subset repeats its last view (the last anchor) so both have
S = 2 + ceil((V - 2) / 2) views.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.types import Views


def subset_size(num_views: int) -> int:
    if num_views < 2:
        raise ValueError(f"the consistency loss needs at least 2 context views, got {num_views}")
    return 2 + (num_views - 2 + 1) // 2


def interleaved_subsets(frame_index, flip):
    """frame_index [B, V] int (ties keep input order), flip: traced bool -> [B, 2, S] view indices."""
    b, v = frame_index.shape
    s = subset_size(v)
    order = jnp.argsort(frame_index, axis=1, stable=True)  # sorted position -> view index
    mid = list(range(1, v - 1))
    pos_a = [0] + mid[0::2] + [v - 1]
    pos_b = [0] + mid[1::2] + [v - 1]
    pos_a += [pos_a[-1]] * (s - len(pos_a))
    pos_b += [pos_b[-1]] * (s - len(pos_b))
    pos = jnp.asarray([pos_a, pos_b], jnp.int32)
    pos = jnp.where(jnp.asarray(flip), pos[::-1], pos)
    return jax.vmap(lambda o: o[pos])(order)


def gather_views(views: Views, index) -> Views:
    """views [B, V, ...], index [B, S] -> Views [B, S, ...]."""
    take = lambda x: jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)  # noqa: E731
    return jax.tree_util.tree_map(take, views)
