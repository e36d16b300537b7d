"""Data-parallel equivalence: 8 (fake CPU) devices, replicated and FSDP, and 2 processes on
localhost (jax.distributed, each reading its own shard) give the single-device loss sequence; a
SIGTERM to one of the 2 processes stops both at the same step with one checkpoint, and the rerun
resumes to bitwise the uninterrupted 2-process parameters."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from locojax.train.loop import train_and_evaluate
from train_toy_setup import final_params, toy_config, toy_data, toy_model

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


def _start_two_processes(workdir, *extra, tag="run"):
    """Two driver processes (jax.distributed on localhost, 1 CPU device each) on one run; each
    one's output goes to workdir/../<workdir name>_<tag>_p<i>.log. Returns (processes, log paths)."""
    coordinator = f"127.0.0.1:{_free_port()}"
    procs, logs = [], []
    for pid in range(2):
        env = _env(1)
        env.update(TOY_COORDINATOR=coordinator, TOY_NUM_PROCESSES="2", TOY_PROCESS_ID=str(pid))
        # Every 2-process run of this module compiles the same programs, each in < 2 s (the
        # conftest's threshold for the persistent cache), but many of them: cache them all
        # (user CPU of a rerun 41 s -> 25 s; a cached executable computes the same bits).
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        log = pathlib.Path(workdir).parent / f"{pathlib.Path(workdir).name}_{tag}_p{pid}.log"
        with open(log, "w") as f:  # the child keeps its own handle
            procs.append(subprocess.Popen([sys.executable, DRIVER, str(workdir), *ARGS, *extra],
                                          env=env, stdout=f, stderr=subprocess.STDOUT))
        logs.append(log)
    return procs, logs


def _wait_all(procs, logs, timeout):
    """Waits for every process (killing all of them on a timeout); returns their logs' texts."""
    try:
        for p in procs:
            p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:
        hung = [i for i, p in enumerate(procs) if p.poll() is None]
        for i in hung:
            procs[i].kill()
            procs[i].wait()
    outs = [pathlib.Path(log).read_text() for log in logs]
    assert not hung, f"processes {hung} did not finish within {timeout} s:\n" + "\n".join(
        f"--- process {i}:\n{o[-3000:]}" for i, o in enumerate(outs))
    return outs


def _run_two_processes(workdir, *extra, tag="run", timeout=400):
    procs, logs = _start_two_processes(workdir, *extra, tag=tag)
    outs = _wait_all(procs, logs, timeout)
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    return outs


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """An uninterrupted 2-process run (the workdir)."""
    wd = tmp_path_factory.mktemp("two") / "run"
    _run_two_processes(wd)
    return wd


def test_two_processes_match_single_process(single_device, two_processes):
    run = json.load(open(two_processes / "run.json"))
    assert run["process_count"] == 2 and run["device_count"] == 2
    losses, evals = _losses(two_processes)
    np.testing.assert_allclose(losses, single_device[0], rtol=1e-5)
    np.testing.assert_allclose(evals, single_device[1], rtol=1e-5)


def _steps_printed(text):
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("STEP ")]


def test_sigterm_to_one_process_stops_all_at_one_step_and_resumes(single_device, two_processes,
                                                                  tmp_path):
    # Preemption usually tells one host: SIGTERM only process 1 (not the coordinator, not the one
    # writing metrics) once it finished step 1; steps then take >= 1 s (the driver sleeps).
    wd = tmp_path / "run"
    procs, logs = _start_two_processes(wd, "--sleep=1.0")
    deadline = time.time() + 300
    while time.time() < deadline and procs[1].poll() is None and not _steps_printed(logs[1].read_text()):
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGTERM)
    outs = _wait_all(procs, logs, timeout=120)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    done = [[ln for ln in o.splitlines() if ln.startswith("DONE ")] for o in outs]
    assert all(done), "\n".join(o[-3000:] for o in outs)
    done = [d[-1].split(maxsplit=2) for d in done]
    stopped = int(done[0][1])
    for pid, (_, step, message) in enumerate(done):
        assert (int(step), message) == (stopped, f"SIGTERM: checkpoint saved at step {stopped}"), pid
    assert 1 <= stopped < 4, stopped
    assert sorted(int(s) for s in os.listdir(wd / "checkpoints") if s.isdigit()) == [stopped]
    # Rerunning the same command resumes there and ends on the uninterrupted run's parameters.
    reruns = _run_two_processes(wd, tag="rerun")
    for out in reruns:
        assert _steps_printed(out) == list(range(stopped + 1, 5)), out[-3000:]
    got, want = final_params(wd, 4), final_params(two_processes, 4)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} (stopped at {stopped})")
    losses, evals = _losses(wd)
    np.testing.assert_allclose(losses, single_device[0], rtol=1e-5)
    np.testing.assert_allclose(evals, single_device[1], rtol=1e-5)
