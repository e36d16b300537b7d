"""notebooks/explore_globalsplat.ipynb runs top to bottom headless (nbclient) within 3 minutes, on the
session's trained tiny run (its restore branch and inline video); its install cell clones nothing
unless told where from."""

from __future__ import annotations

import os
import pathlib
import time

import pytest


REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

NOTEBOOK = REPO_ROOT / "notebooks" / "explore_globalsplat.ipynb"


def test_notebook_runs_headless(tiny_run, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    # The restore branch: the session's 2-step run (its config.json names its data directory).
    monkeypatch.setenv("LOCOJAX_NOTEBOOK_WORKDIR", str(tiny_run["workdir"]))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    client = nbclient.NotebookClient(nb, timeout=170, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO_ROOT)}})
    client.execute()
    assert time.time() - t0 < 180
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "parameters" in outputs and "PSNR" in outputs and "scene.ply" in outputs
    assert f"restored step 2 from {tiny_run['workdir']}" in outputs
    gifs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/gif" in o.get("data", {})]
    assert len(gifs) == 1 and list((tiny_run["workdir"] / "videos").glob("*_orbit_*.gif"))
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []))
    assert images >= 4  # context views, renders + depth, Gaussians 3D plot, histograms


def _install_cell() -> str:
    import json

    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return next("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "LOCOJAX_SOURCE" in "".join(c["source"]))


def test_install_cell_clones_no_fixed_address(monkeypatch):
    """In a fresh environment (locojax not importable) the cell refuses without LOCOJAX_SOURCE, and
    with a local path pip-installs that path: no repository address is built in."""
    import importlib.util
    import subprocess

    src = _install_cell()
    assert "github.com" not in NOTEBOOK.read_text()
    calls = []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "locojax" else object())
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    monkeypatch.delenv("LOCOJAX_SOURCE", raising=False)
    with pytest.raises(RuntimeError, match="set LOCOJAX_SOURCE"):
        exec(compile(src, "install_cell", "exec"), {})
    monkeypatch.setenv("LOCOJAX_SOURCE", str(REPO_ROOT))
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    exec(compile(src, "install_cell", "exec"), {})
    assert len(calls) == 1 and calls[0][-4:] == ["install", "-q", "-e", str(REPO_ROOT)]
