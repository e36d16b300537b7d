"""Import layering: model families and losses never import the trainer (the trainer hands them the
renderer), so a family can be used without `locojax.train` and the trainer stays family-neutral."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYERS = ["locojax/models", "locojax/losses", "locojax/types.py"]


def _imports(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


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
