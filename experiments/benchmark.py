"""python -m experiments.benchmark NAME [args]: dispatch to `experiments.benchmarks.NAME.main(argv)`.

Each benchmark module lives in `experiments/benchmarks/NAME.py` (render, metrics, globalsplat, ...)
and parses its own arguments.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys


def available() -> list[str]:
    import experiments.benchmarks as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nbenchmarks: " + (", ".join(names) or "(none yet)"))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"error: unknown benchmark {name!r}; available: {', '.join(names) or '(none yet)'}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"experiments.benchmarks.{name}")
    rc = module.main(rest)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
