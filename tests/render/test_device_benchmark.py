"""`python -m experiments.benchmark device --small` runs on CPU: both compositing backends (pallas
interpreted) agree with the stored CPU reference images to their uint16 quantisation, a training
step and the data iterator report their figures, and a missing section is recorded, not fatal."""

import json
import os

import numpy as np
import pytest

from experiments.benchmarks import device


@pytest.mark.long_running
def test_device_benchmark_small_on_cpu(tmp_path):
    """Rasterizer (both backends) and data-iterator sections; the training step is tested below."""
    out = tmp_path / "device.json"
    rc = device.main(["--small", "--sizes", "1024", "--views", "2", "--sections", "raster,data", f"--out={out}"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["platform"] == "cpu" and "pallas_unavailable" not in report
    cases = report["rasterizer"]
    assert [(c["backend"], c["n"], c["views"]) for c in cases] == [("xla", 1024, 2), ("pallas", 1024, 2)]
    for c in cases:
        assert "error" not in c, c.get("error")
        assert c["fwd_s"] > 0 and c["fwd_bwd_s"] > 0 and c["compile_s"] > 0 and c["grads_finite"]
        a = c["agreement"]
        assert a["views_compared"] == [0, 1] and a["agrees"]
        # CPU against the CPU reference: only the uint16 quantisation (0.5 / 65535) remains.
        assert a["rgb_max_abs"] < 1e-5 and a["alpha_max_abs"] < 1e-5 and a["rgb_psnr_db"] > 90
    data = report["data"]
    assert "error" not in data, data.get("error")
    assert data["batches_per_s"] > 0 and data["dataset"] == "synthetic"
    assert report["train_steps"] == []


@pytest.mark.long_running
def test_device_benchmark_train_step_section(tmp_path):
    out = tmp_path / "device.json"
    # tokengs_tiny: the cheapest preset step to compile on CPU (the section's figures are what is tested)
    rc = device.main(["--small", "--sections", "train", "--train", "tokengs_tiny", f"--out={out}"])
    assert rc == 0
    (step,) = json.loads(out.read_text())["train_steps"]
    assert "error" not in step, step.get("error")
    assert step["config"] == "tokengs_tiny" and step["step_s"] > 0 and step["compile_s"] > 0
    assert step.get("peak_rss_bytes", 0) > 0 or step.get("peak_device_bytes", 0) > 0


def test_missing_section_is_recorded_not_fatal(tmp_path):
    out = tmp_path / "device.json"
    assert device.main(["--small", "--sections", "train", "--train", "no_such_preset", f"--out={out}"]) == 0
    (step,) = json.loads(out.read_text())["train_steps"]
    assert "no_such_preset" in step["error"]


def test_agreement_detects_a_different_image(tmp_path):
    """The agreement figures are not vacuous: a perturbed rendering fails `agrees`."""
    ref = device._reference_path("small", 1024)
    stored = np.load(ref)
    rgb = stored["rgb"][None].astype(np.float64) / device.QUANT  # [1, views, H, W, 3]
    alpha = (stored["alpha"][None].astype(np.float64) / device.QUANT)[..., None]
    depth = stored["depth"][None].astype(np.float64)[..., None]

    class Out:
        pass

    same, off = Out(), Out()
    same.rgb, same.alpha, same.depth = rgb, alpha, depth
    off.rgb, off.alpha, off.depth = rgb + 0.01 * (np.arange(rgb.size).reshape(rgb.shape) % 2), alpha, depth
    assert device.agreement(same, ref, 2)["agrees"]
    bad = device.agreement(off, ref, 2)
    assert not bad["agrees"] and bad["rgb_max_abs"] == pytest.approx(0.01, abs=1e-4)
    assert "error" in device.agreement(same, os.fspath(tmp_path / "missing.npz"), 2)


def test_reference_files_are_small():
    files = [os.path.join(device.REFERENCE_DIR, f) for f in os.listdir(device.REFERENCE_DIR)]
    assert sum(os.path.getsize(f) for f in files) < 4e6
