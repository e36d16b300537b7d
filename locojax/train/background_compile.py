"""Trace, lower and compile a jitted function on a background thread while the caller does other work.

A training run needs its train step only after the step-0 evaluation; a warm rerun spends most of its
start-up tracing the step (seconds of Python) and loading its executable from the persistent
compilation cache (tens of CPU-seconds for `locosplat_tiny`'s, docs/performance.md), and both can run
beside the evaluation: XLA's compile and executable loading release the GIL, as does running the
evaluation's executables, and JAX's tracing state is thread-local.

The result is the AOT `jax.stages.Compiled` of the exact argument specs (shape, dtype, weak type and
sharding of live example arrays), so calling it with differently typed arguments fails loudly instead
of compiling again (static shapes: one compilation per configuration).
"""

from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp


def arg_spec(tree):
    """Pytree of arrays -> pytree of `jax.ShapeDtypeStruct` with each array's shape, dtype, weak type
    and sharding (what `.lower(...)` takes to compile for exactly those arguments)."""
    return jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None),
                                       weak_type=getattr(x, "weak_type", False)), tree)


@functools.cache
def _initialise_lapack() -> None:
    """XLA:CPU lowers `jnp.linalg.inv` (the models' camera inverses) to LAPACK custom calls, whose first
    lowering imports scipy. Done once on the caller's thread before the worker starts: otherwise the
    worker's and the caller's lowerings both reach that import while they contend for the GIL
    (seconds on 2 cores; docs/performance.md, "Warm rerun, end to end")."""
    if jax.default_backend() == "cpu":
        jax.jit(jnp.linalg.inv).lower(jax.ShapeDtypeStruct((2, 2), jnp.float32))


class BackgroundCompile:
    """`jitted.lower(*specs).compile()` running on a daemon thread from construction.

    Args:
      jitted: a `jax.jit`-wrapped function.
      *specs: its arguments' `arg_spec`s (or live arrays: only their specs are used).
    """

    def __init__(self, jitted, *specs):
        self._specs = tuple(arg_spec(s) for s in specs)
        self._jitted = jitted
        self._compiled = None
        self._error: BaseException | None = None
        _initialise_lapack()
        self._thread = threading.Thread(target=self._work, name="locojax-background-compile", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._compiled = self._jitted.lower(*self._specs).compile()
        except BaseException as e:  # re-raised in the caller's thread by result()
            self._error = e

    def result(self):
        """Waits for the compilation; the `jax.stages.Compiled`, or the compilation's exception."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._compiled
