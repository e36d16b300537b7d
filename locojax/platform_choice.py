"""Choices between a CPU and an accelerator code path made when a function is lowered, not traced.

`jax.default_backend()` at trace time bakes the host's path into every lowered module: a training
step exported for cuda from a CPU host (`jax.export.export(..., platforms=("cuda",))`) would carry
the CPU path. `jax.lax.platform_dependent` instead keeps both and picks one per target platform
when lowering; lowering for a single platform keeps only that platform's branch.
"""

from __future__ import annotations

from typing import Callable

import jax


def cpu_or_accelerator(cpu_fn: Callable, other_fn: Callable, *args, same: bool = False):
    """`cpu_fn(*args)` where lowered for CPU, `other_fn(*args)` on every other platform.

    Args:
      cpu_fn, other_fn: functions of `args` with the same output structure (shapes and dtypes).
      same: the two are known to be the same computation (then `other_fn` alone is traced).
    Returns:
      the chosen function's output; differentiable like either branch.
    """
    if same:
        return other_fn(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu_fn, default=other_fn)
