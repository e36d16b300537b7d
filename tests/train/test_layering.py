"""Import layering of the project, read from the source (every import statement anywhere in a file,
function-level ones included, relative ones resolved), nothing imported:

  locojax (types, geometry, render, metrics, losses, models, io)  <  data_pipelines  <  locojax.train
  <  experiments; configs beside locojax.train (it may import locojax and data_pipelines; only
  experiments import it).

A layer imports only itself and the layers below it ("upward" imports are forbidden), and no group of
modules in locojax/, data_pipelines/ or experiments/ imports itself in a circle. Model families and
losses never import the trainer (the trainer hands them the renderer), so a family can be used without
`locojax.train` and the trainer stays family-neutral.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYERS = ["locojax/models", "locojax/losses", "locojax/types.py"]
PACKAGES = ["locojax", "data_pipelines", "configs", "experiments"]

# What each layer may import (of the project's packages); the layer of a module is its longest prefix here.
MAY_IMPORT = {
    "locojax": {"locojax"},
    "data_pipelines": {"locojax", "data_pipelines"},
    "locojax.train": {"locojax", "data_pipelines", "locojax.train"},
    "configs": {"locojax", "data_pipelines", "configs"},
    "experiments": {"locojax", "data_pipelines", "locojax.train", "configs", "experiments"},
}

# The circle check covers every project package.
CYCLE_PACKAGES = ["locojax", "data_pipelines", "configs", "experiments"]


def _imports(path: pathlib.Path) -> list[str]:
    """Module names the file imports (`from a.b import c` gives a.b and a.b.c)."""
    return [m for m, _ in _import_lines(path, _module_name(path) if path.is_relative_to(ROOT) else "")]


def _module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.lru_cache(maxsize=None)
def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@functools.lru_cache(maxsize=None)
def _import_lines(path: pathlib.Path, module: str, bases: bool = True) -> tuple[tuple[str, int], ...]:
    """(imported name, line) for every import in the file at any depth; relative imports are resolved
    against `module` (the file's own dotted name). `from a.b import c` gives a.b.c, and a.b too when
    `bases` (for the dependency graph it does not: importing a module runs its parent packages'
    `__init__` anyway, so that edge would make every package that re-exports its modules a circle)."""
    tree = _tree(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top-level package")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            if node.module and (bases or any(a.name == "*" for a in node.names)):
                out.append((base, node.lineno))
            out += [(f"{base}.{a.name}" if base else a.name, node.lineno) for a in node.names if a.name != "*"]
    return tuple(out)


def _project_modules(root: pathlib.Path = ROOT) -> dict[str, pathlib.Path]:
    """{dotted module name: file} of every module of the project's packages under `root`."""
    return {_module_name(f, root): f for package in PACKAGES for f in sorted((root / package).rglob("*.py"))}


def _project_module(name: str, mods) -> str | None:
    """The project module an imported name lands in (`a.b.func` -> `a.b`), or None (not ours)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _layer(module: str) -> str:
    return max((k for k in MAY_IMPORT if module == k or module.startswith(k + ".")), key=len)


def _graph(mods) -> dict[str, set[str]]:
    """module -> the project modules it imports (itself left out)."""
    graph = {}
    for name, path in mods.items():
        targets = {_project_module(m, mods) for m, _ in _import_lines(path, name, bases=False)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _upward_imports(mods, root: pathlib.Path = ROOT) -> list[str]:
    """"FILE:LINE (layer) imports MODULE (layer)" for every import a module's layer may not make."""
    bad = []
    for name, path in mods.items():
        for imported, line in _import_lines(path, name, bases=False):
            target = _project_module(imported, mods)
            if target is not None and _layer(target) not in MAY_IMPORT[_layer(name)]:
                bad.append(f"{path.relative_to(root)}:{line} ({_layer(name)}) imports {target} ({_layer(target)})")
    return sorted(set(bad))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def _files():
    for layer in LAYERS:
        p = ROOT / layer
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")))


@pytest.mark.parametrize("layer", LAYERS)
def test_no_arrow_to_the_trainer(layer):
    files = [f for f in _files() if str(f.relative_to(ROOT)).startswith(layer)]
    assert files, layer
    bad = [(str(f.relative_to(ROOT)), m) for f in files for m in _imports(f)
           if m == "locojax.train" or m.startswith("locojax.train.")]
    assert not bad, bad


def test_the_check_sees_a_trainer_import(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("from locojax.train.step import make_train_step\nimport locojax.train\n")
    assert "locojax.train.step" in _imports(p) and "locojax.train" in _imports(p)


def test_no_upward_imports():
    mods = _project_modules()
    assert {_layer(m) for m in mods} == set(MAY_IMPORT), "a layer without modules: is MAY_IMPORT stale?"
    bad = _upward_imports(mods)
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_no_import_circles():
    mods = {m: p for m, p in _project_modules().items() if m.split(".")[0] in CYCLE_PACKAGES}
    circles = _circles(_graph(mods))
    assert not circles, ("modules that import each other in a circle (each line one strongly connected "
                         "component):\n" + "\n".join(", ".join(c) for c in circles))


def test_the_checks_see_a_lazy_upward_import_and_a_circle(tmp_path):
    """The same functions on a made-up tree: a function-level import of the trainer by the data
    pipelines, relative imports (one of them upward), and a circle loop -> run -> aot -> loop closed by a
    function-level relative import are all found, as is a package whose function imports a submodule
    that imports the package back."""
    files = {
        "data_pipelines/__init__.py": "",
        "data_pipelines/reader.py": "def f():\n    from locojax.train.loop import build_run\n    return build_run\n",
        "data_pipelines/samplers/__init__.py": "def pick():\n    from data_pipelines.samplers import a\n",
        "data_pipelines/samplers/a.py": "from data_pipelines.samplers import pick\n",
        "locojax/__init__.py": "",
        "locojax/render.py": "from .train import run\n",
        "locojax/train/__init__.py": "",
        "locojax/train/loop.py": "from .run import build_run\n",
        "locojax/train/run.py": "from locojax.train import aot\nbuild_run = 1\n",
        "locojax/train/aot.py": "def g():\n    from . import loop\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mods = _project_modules(tmp_path)
    assert len(mods) == len(files)
    circles = _circles(_graph(mods))
    assert circles == [["data_pipelines.samplers", "data_pipelines.samplers.a"],
                       ["locojax.train.aot", "locojax.train.loop", "locojax.train.run"]]
    assert _upward_imports(mods, tmp_path) == [
        "data_pipelines/reader.py:2 (data_pipelines) imports locojax.train.loop (locojax.train)",
        "locojax/render.py:1 (locojax) imports locojax.train.run (locojax.train)"]
