"""Exact resume: SIGTERM saves a checkpoint and exits cleanly; a run SIGKILLed at an arbitrary step
and rerun reaches bitwise the parameters of an uninterrupted run."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

from train_toy_setup import final_params

DRIVER = str(pathlib.Path(__file__).with_name("train_toy_driver.py"))
ARGS = ["total_steps=9", "checkpoint_every=2", "eval_every=100", "log_every=1"]


def _env():
    env = dict(os.environ)
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
    return env


def _run(workdir, *extra):
    p = subprocess.run([sys.executable, DRIVER, str(workdir), *ARGS, *extra], env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def _start_and_signal(workdir, sig, after_step):
    """Start a run, send `sig` once it printed STEP >= after_step; returns (returncode, stdout)."""
    p = subprocess.Popen([sys.executable, DRIVER, str(workdir), *ARGS, "--sleep=0.3"], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in p.stdout:
            lines.append(line)
            if line.startswith("STEP ") and int(line.split()[1]) >= after_step:
                p.send_signal(sig)
                break
        rest, _ = p.communicate(timeout=120)
        lines.append(rest)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, "".join(lines)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    wd = tmp_path_factory.mktemp("uninterrupted")
    _run(wd)
    return final_params(wd, 9)


def test_sigterm_then_sigkill_then_resume_is_bitwise_exact(reference, tmp_path):
    # SIGTERM: a checkpoint at the current step and a clean exit.
    rc, out = _start_and_signal(tmp_path, signal.SIGTERM, 2)
    assert rc == 0, out
    line = [ln for ln in out.splitlines() if ln.startswith("DONE")][-1]
    stopped_at = int(line.split()[1])
    assert 2 <= stopped_at < 9 and "SIGTERM" in line, line
    steps = sorted(int(s) for s in os.listdir(tmp_path / "checkpoints") if s.isdigit())
    assert steps[-1] == stopped_at
    # Resume, then SIGKILL at an arbitrary later step (possibly during an async checkpoint write).
    kill_after = random.Random().randint(min(stopped_at + 2, 8), 8)
    rc, out = _start_and_signal(tmp_path, signal.SIGKILL, kill_after)
    assert rc == -signal.SIGKILL, out
    first = int([ln for ln in out.splitlines() if ln.startswith("STEP ")][0].split()[1])
    assert first == stopped_at + 1, "the rerun must resume from the SIGTERM checkpoint"
    # Rerun to the end: bitwise the uninterrupted run's parameters.
    _run(tmp_path)
    got = final_params(tmp_path, 9)
    assert got.keys() == reference.keys()
    for k in reference:
        np.testing.assert_array_equal(got[k], reference[k], err_msg=f"{k} (SIGTERM at {stopped_at}, "
                                                                    f"SIGKILL after {kill_after})")
