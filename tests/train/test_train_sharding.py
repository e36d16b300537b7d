"""Data-parallel equivalence: 8 (fake CPU) devices, replicated and FSDP, and 2 processes on
localhost (jax.distributed, each reading its own shard) give the single-device loss sequence."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

from locojax.train.loop import train_and_evaluate
from train_toy_setup import toy_config, toy_data, toy_model

DRIVER = str(pathlib.Path(__file__).with_name("train_toy_driver.py"))
ARGS = ["total_steps=4", "batch_size=8", "eval_every=100", "checkpoint_every=100", "log_every=1"]


def _losses(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    train = [r for r in recs if "split" not in r]
    evals = [r["psnr"] for r in recs if r.get("split") == "test"]
    return np.array([r["loss"] for r in train]), np.array(evals)


def _env(devices):
    env = dict(os.environ)
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    env.pop("TOY_COORDINATOR", None)
    return env


@pytest.fixture(scope="module")
def single_device(tmp_path_factory):
    import configs

    wd = str(tmp_path_factory.mktemp("single"))
    config = toy_config()
    configs.apply_overrides(config, ARGS)
    train_and_evaluate(config, wd, model=toy_model(config), data=toy_data())
    return _losses(wd)


def test_eight_devices_match_single_device(single_device, tmp_path):
    runs = ";".join([f"{tmp_path / 'replicated'}:sharding=replicated", f"{tmp_path / 'fsdp'}:sharding=fsdp"])
    p = subprocess.run([sys.executable, DRIVER, f"--runs={runs}", *ARGS], env=_env(8),
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = json.load(open(tmp_path / "replicated" / "run.json"))
    assert run["device_count"] == 8
    for mode in ("replicated", "fsdp"):
        losses, evals = _losses(tmp_path / mode)
        np.testing.assert_allclose(losses, single_device[0], rtol=1e-5, err_msg=mode)
        np.testing.assert_allclose(evals, single_device[1], rtol=1e-5, err_msg=mode)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_single_process(single_device, tmp_path):
    coordinator = f"127.0.0.1:{_free_port()}"
    procs = []
    for pid in range(2):
        env = _env(1)
        env.update(TOY_COORDINATOR=coordinator, TOY_NUM_PROCESSES="2", TOY_PROCESS_ID=str(pid))
        procs.append(subprocess.Popen([sys.executable, DRIVER, str(tmp_path), *ARGS], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=400)[0])
        finally:
            if p.poll() is None:
                p.kill()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    run = json.load(open(tmp_path / "run.json"))
    assert run["process_count"] == 2 and run["device_count"] == 2
    losses, evals = _losses(tmp_path)
    np.testing.assert_allclose(losses, single_device[0], rtol=1e-5)
    np.testing.assert_allclose(evals, single_device[1], rtol=1e-5)
