"""python -m experiments.benchmark NAME [args]: dispatch to `experiments.benchmarks.NAME.main(argv)`.

Each benchmark module lives in `experiments/benchmarks/NAME.py` (render, metrics, globalsplat, ...)
and parses its own arguments (`python -m experiments.benchmark NAME --help`); every one also takes
`--jax_cache_dir=DIR` (the persistent compilation cache; `off` disables). Modules without
a `main` (e.g. process_memory) are helpers, not benchmarks.
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import sys

from experiments import cli


def _has_main(path: str) -> bool:
    """Whether the module at `path` defines a top-level `main` (read, not imported: importing would
    pull in JAX for every listed module)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)


def available() -> list[str]:
    """Benchmark names: the modules of experiments/benchmarks with a `main` (helpers such as
    process_memory are not benchmarks)."""
    import experiments.benchmarks as pkg

    out = []
    for m in pkgutil.iter_modules(pkg.__path__):
        path = os.path.join(m.module_finder.path, m.name + ".py")
        if not m.name.startswith("_") and not m.ispkg and os.path.exists(path) and _has_main(path):
            out.append(m.name)
    return sorted(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nbenchmarks: " + (", ".join(names) or "(none yet)"))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    # Every benchmark runs with the persistent compilation cache (locojax/train/compile_cache.py);
    # --jax_cache_dir is taken here, and passed on through the environment to the module (and to any
    # process it starts).
    from locojax.train import compile_cache

    for a in [a for a in rest if a.startswith("--jax_cache_dir=")]:
        os.environ[compile_cache.ENV_VAR] = a.split("=", 1)[1]
        rest.remove(a)
    if name not in names:
        return cli.error(f"unknown benchmark {name!r}; available: {', '.join(names) or '(none yet)'}")
    with cli.OneLineErrors({OSError: 2}) as failed:
        compile_cache.enable()
    if failed.exit_code:
        return failed.exit_code
    module = importlib.import_module(f"experiments.benchmarks.{name}")
    rc = module.main(rest)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
