"""Global sum of squares / norm of a pytree in few XLA kernels.

`optax.tree.norm` reduces every leaf on its own: one reduce kernel per leaf on XLA:CPU, plus a
square and a reduce-window kernel for each large leaf (its tree-reduction rewrite); 1,233 kernels
and ~4 CPU-s of compile for the 831 gradient leaves of `locosplat_tiny`. Concatenating the raveled
leaves into buckets reduces each bucket in one fused kernel (2 kernels, ~0.6 CPU-s for that model;
docs/performance.md, "optimizer kernels"). The buckets bound the temporary a concatenation may need.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.train.sharding import FSDP_MIN_ELEMENTS

# Elements per concatenated bucket (64 MiB of float32); a leaf at least this large is reduced alone.
BUCKET_ELEMENTS = 1 << 24


def concat_limit(sharding_mode: str) -> int | None:
    """`concat_below` for a run's `config.sharding`: under "fsdp" a leaf of FSDP_MIN_ELEMENTS or more
    may be sharded, and concatenating it would all-gather it; None (concatenate any leaf) otherwise."""
    return FSDP_MIN_ELEMENTS if sharding_mode == "fsdp" else None


def _buckets(leaves, bucket_elements: int, concat_below: int | None):
    buckets, current, size = [], [], 0
    for x in leaves:
        if x.size >= bucket_elements or (concat_below is not None and x.size >= concat_below):
            buckets.append([x])
            continue
        if current and size + x.size > bucket_elements:
            buckets.append(current)
            current, size = [], 0
        current.append(x)
        size += x.size
    if current:
        buckets.append(current)
    return buckets


def sum_of_squares(tree, bucket_elements: int = BUCKET_ELEMENTS, concat_below: int | None = None):
    """sum over all leaves of sum(x**2), accumulated in float32 (or the leaves' wider dtype).

    Args:
      tree: pytree of floating arrays (any shapes).
      bucket_elements: leaves are concatenated into buckets of at most this many elements.
      concat_below: if given, leaves with at least this many elements are reduced alone (see
        `concat_limit`).
    Returns:
      scalar array; 0.0 for a tree without leaves.
    """
    leaves = jax.tree_util.tree_leaves(tree)
    dtype = jnp.result_type(jnp.float32, *[x.dtype for x in leaves]) if leaves else jnp.float32
    total = jnp.zeros((), dtype)
    for bucket in _buckets(leaves, bucket_elements, concat_below):
        flat = jnp.concatenate([jnp.ravel(x).astype(dtype) for x in bucket])
        total = total + jnp.sum(jnp.square(flat))
    return total


def global_norm(tree, bucket_elements: int = BUCKET_ELEMENTS, concat_below: int | None = None):
    """sqrt(sum_of_squares(tree, ...)): the norm optax.tree.norm computes, summed in another order."""
    return jnp.sqrt(sum_of_squares(tree, bucket_elements, concat_below))
