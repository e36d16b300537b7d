"""Identical, separately named linen blocks run as one `jax.lax.scan`, so XLA traces, lowers and
compiles the block once instead of once per layer (issue 23: compile time).

The parameter tree is the unrolled one (`blocks_0` ... `blocks_{L-1}` as children of the caller), so
weight converters and checkpoints are unaffected: `init` runs the plain Python loop, which creates the
parameters under their names; `apply` stacks them leaf-wise and scans a functional copy of the block.

    make = functools.partial(DinoBlock, dim, heads, dtype)
    x, hidden = scan_blocks(self, make, [f"blocks_{i}" for i in range(12)], x, out_every=3)
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def stack_block_params(parent: nn.Module, names: Sequence[str]):
    """The params of `parent`'s children `names`, stacked leaf-wise.

    Args:
      parent: a bound module whose "params" hold one subtree per name (all with the same structure).
      names: the children, in the order they are applied.
    Returns:
      a pytree like one child's params, every leaf with a leading axis of len(names).
    """
    params = parent.variables.get("params", {})
    missing = [n for n in names if n not in params]
    if missing:
        raise KeyError(f"module {parent.name!r}: no params for blocks {missing} (have {sorted(params)})")
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *[params[n] for n in names])


def functional(parent: nn.Module, module: nn.Module) -> Callable:
    """`module` (a child of `parent`, already initialised) as a pure function of its inputs, to be called
    inside `jax.lax.scan` (bound linen modules cannot be called under a raw JAX transform)."""
    copy, params = module.clone(parent=None, name=None), parent.variables["params"][module.name]
    return lambda *args: copy.apply({"params": params}, *args)


def tap_stride(depth: int, taps: Sequence[int]) -> int:
    """The largest k such that every tap (0-based block index) is the last block of a group of k
    (taps (2, 5, 8, 11) of 12 blocks -> 3), so that `scan_blocks(..., out_every=k)` returns the taps
    without keeping every block's output."""
    return math.gcd(depth, *[t + 1 for t in taps])


def scan_layers(step: Callable, stacked, carry, xs=None, *, out_every: int = 1):
    """carry <- step(carry, params_i, xs_i) for the L layers, as nested `jax.lax.scan`s: the step is
    traced and compiled once; the carry is kept after every `out_every`-th layer only.

    Args:
      step: (carry, params of one layer, xs_i) -> carry (same structure, shapes and dtypes).
      stacked: the layers' params, every leaf [L, ...] (`stack_block_params`).
      carry: the initial carry (a pytree).
      xs: per-layer inputs, every leaf [L, ...], or None.
      out_every: k; L must be a multiple of k.
    Returns:
      (the carry after layer L - 1, the carries after layers k-1, 2k-1, ...: every leaf [L // k, ...]).
    """
    n = jax.tree.leaves(stacked)[0].shape[0]
    if n % out_every:
        raise ValueError(f"scan_layers: out_every={out_every} does not divide the {n} layers")
    groups = jax.tree.map(lambda a: a.reshape((n // out_every, out_every) + a.shape[1:]), (stacked, xs))

    def one(c, pq):
        return step(c, *pq), None

    def group(c, pq):
        if out_every > 1:
            c, _ = jax.lax.scan(one, c, pq)
        else:  # no inner loop of one trip
            c = step(c, *jax.tree.map(lambda a: a[0], pq))
        return c, c

    return jax.lax.scan(group, carry, groups)


def scan_blocks(parent: nn.Module, make: Callable[..., nn.Module], names: Sequence[str], x, *args,
                out_every: int = 1, unroll: bool = False):
    """x -> block_{L-1}(... block_0(x, *args) ..., *args), the blocks' params under `parent`'s `names`.

    Args:
      parent: the calling bound module (its `is_initializing()` and `variables` are used).
      make: builds one block: `make(name=...)` a child of `parent`, `make(parent=None)` an unbound copy
        (e.g. `functools.partial(Block, dim, heads)`); every block must have the same fields.
      names: the blocks' names, in application order (L of them).
      x: the carried input [...]; every block must return the same shape and dtype.
      *args: inputs given unchanged to every block (an attention bias, ...).
      out_every: k; the hidden state is returned after blocks k-1, 2k-1, ... (L must be a multiple of k).
      unroll: run the named blocks in a Python loop (the reference path, and what `init` always runs;
        also taken for a single block, which a scan cannot share with anything).
    Returns:
      (x after the last block, hidden [L // k, *x.shape]: hidden[j] is x after block (j + 1) * k - 1).
    """
    n = len(names)
    if n % out_every:
        raise ValueError(f"scan_blocks: out_every={out_every} does not divide the {n} blocks {names[0]}...")
    if unroll or n == 1 or parent.is_initializing():  # init creates each block's params under its name
        hidden = []
        for i, name in enumerate(names):
            x = make(name=name)(x, *args)
            if (i + 1) % out_every == 0:
                hidden.append(x)
        return x, jnp.stack(hidden)
    block = make(parent=None)
    return scan_layers(lambda h, p, _: block.apply({"params": p}, h, *args), stack_block_params(parent, names),
                       x, out_every=out_every)
