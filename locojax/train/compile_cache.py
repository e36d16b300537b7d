"""JAX's persistent compilation cache, on by default for every entry point.

XLA:CPU spends minutes compiling a train step (issue 23: ~230 s for `locosplat_tiny` on the 2-core
box); the persistent cache stores each compiled executable on disk keyed by its HLO, compile options,
backend and jax/jaxlib versions, so a rerun, a resume, an `evaluate` or a `render` of the same config
loads it instead. A changed config or code lowers to other HLO and so to another key: a stale
executable is never served (JAX's own guarantee; tests/train/test_compile_cache.py checks it).

Where the cache lives, first match wins:
  1. the `--jax_cache_dir` flag of every entry point (`""` or `off` disables),
  2. `$LOCOJAX_JAX_CACHE_DIR` (`""` or `off` disables),
  3. `$JAX_COMPILATION_CACHE_DIR` (JAX's own variable; the test suite sets it),
  4. `$XDG_CACHE_HOME/locojax/jax-cache`, by default `~/.cache/locojax/jax-cache`.

Executables that took at least `MIN_COMPILE_SECONDS` to compile are written (JAX's default is 1 s;
`$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS` overrides). The directory is trusted code: do not share
it with users you do not trust (JAX's warning on `jax.experimental.compilation_cache`).
"""

from __future__ import annotations

import os
import threading
from typing import Optional

ENV_VAR = "LOCOJAX_JAX_CACHE_DIR"
DISABLED = ("", "off", "none", "false", "0")
# Half JAX's 1 s default: the tiny presets' smaller evaluation executables (LPIPS, render + metrics at
# 32-64 px) compile in about a CPU-second each, and a rerun should load them too. The many sub-0.5 s
# executables (initialisation, eager ops) stay out of the directory.
MIN_COMPILE_SECONDS = 0.5

_lock = threading.Lock()
_counts = {"hits": 0, "writes": 0}
# JAX's own timers (jax/_src/dispatch.py): jaxpr tracing, lowering to StableHLO, and the backend
# compile (a persistent-cache read included).
_DURATION_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_seconds",
                    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_seconds",
                    "/jax/core/compile/backend_compile_duration": "compile_seconds"}
_seconds = {k: 0.0 for k in _DURATION_EVENTS.values()}
_listening = False


def default_dir() -> str:
    """`$XDG_CACHE_HOME/locojax/jax-cache` (`~/.cache/locojax/jax-cache` without XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "locojax", "jax-cache")


def resolve_dir(flag_value: Optional[str] = None) -> Optional[str]:
    """The cache directory the precedence above gives (None: disabled).

    flag_value: the `--jax_cache_dir` flag (None when not given)."""
    for value in (flag_value, os.environ.get(ENV_VAR)):
        if value is not None:
            return None if value.strip().lower() in DISABLED else os.path.abspath(os.path.expanduser(value))
    jax_env = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if jax_env:
        return os.path.abspath(os.path.expanduser(jax_env))
    return default_dir()


def enable(flag_value: Optional[str] = None) -> Optional[str]:
    """Point JAX's persistent compilation cache at `resolve_dir(flag_value)` (or switch it off).

    Safe to call more than once and after compilations: a different directory takes effect for the
    next compilation. Returns the directory in use, or None when disabled."""
    import jax
    from jax._src import compilation_cache as jax_cache

    path = resolve_dir(flag_value)
    if path is not None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise OSError(f"cannot create the JAX compilation cache directory {path} ({e.strerror}); "
                          f"move it with --jax_cache_dir or ${ENV_VAR}, or set it to 'off'") from e
    changed = jax.config.jax_compilation_cache_dir != path
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if changed:
        # JAX opens its cache once per process, at the first compilation; a new directory needs that
        # state reset (a no-op before any compilation).
        jax_cache.reset_cache()
    _listen()
    return path


def _listen() -> None:
    global _listening
    with _lock:
        if _listening:
            return
        import jax.monitoring

        def on_event(event: str, **kwargs) -> None:
            if event == "/jax/compilation_cache/cache_hits":
                _counts["hits"] += 1
            elif event == "/jax/compilation_cache/cache_misses":
                _counts["writes"] += 1

        def on_duration(event: str, seconds: float, **kwargs) -> None:
            key = _DURATION_EVENTS.get(event)
            if key is not None:
                _seconds[key] += seconds

        jax.monitoring.register_event_listener(on_event)
        jax.monitoring.register_event_duration_secs_listener(on_duration)
        _listening = True


def counts() -> dict:
    """Since the first `enable` or `counts` call in this process: {"hits", "writes"}, executables loaded from the
    persistent cache and compiled and written to it (those above the compile-time threshold), and
    {"trace_seconds", "lower_seconds", "compile_seconds"}, JAX's time spent tracing, lowering and
    compiling (or reading the compiled executable from the cache) summed over every function."""
    _listen()
    return dict(_counts, **_seconds)


def num_entries(path: str) -> int:
    """Executables stored in cache directory `path` (JAX writes one `<key>-cache` file each)."""
    if not path or not os.path.isdir(path):
        return 0
    return sum(1 for name in os.listdir(path) if name.endswith("-cache"))
