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

# Elements per concatenated bucket (64 MiB of float32); a leaf at least this large is reduced alone.
BUCKET_ELEMENTS = 1 << 24


def _buckets(leaves, bucket_elements: int):
    buckets, current, size = [], [], 0
    for x in leaves:
        if x.size >= bucket_elements:
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


def sum_of_squares(tree, bucket_elements: int = BUCKET_ELEMENTS):
    """sum over all leaves of sum(x**2), accumulated in float32 (or the leaves' wider dtype).

    Args:
      tree: pytree of floating arrays (any shapes).
      bucket_elements: leaves are concatenated into buckets of at most this many elements.
    Returns:
      scalar array; 0.0 for a tree without leaves.
    """
    leaves = jax.tree_util.tree_leaves(tree)
    dtype = jnp.result_type(jnp.float32, *[x.dtype for x in leaves]) if leaves else jnp.float32
    total = jnp.zeros((), dtype)
    for bucket in _buckets(leaves, bucket_elements):
        flat = jnp.concatenate([jnp.ravel(x).astype(dtype) for x in bucket])
        total = total + jnp.sum(jnp.square(flat))
    return total


def global_norm(tree, bucket_elements: int = BUCKET_ELEMENTS):
    """sqrt(sum_of_squares(tree)): the norm optax.tree.norm computes, summed in another order."""
    return jnp.sqrt(sum_of_squares(tree, bucket_elements))
