"""The persistent compilation cache (locojax/train/compile_cache.py): where it lives, that every
entry point turns it on, that a second run of the same config loads its executables instead of
compiling them, and that another config gets entries of its own."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from locojax.train import compile_cache

DRIVER = str(pathlib.Path(__file__).with_name("train_toy_driver.py"))
ARGS = ["total_steps=2", "checkpoint_every=100", "eval_every=100", "log_every=1"]


def test_cache_dir_precedence(monkeypatch, tmp_path):
    for var in (compile_cache.ENV_VAR, "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.resolve_dir() == str(tmp_path / "home" / ".cache" / "locojax" / "jax-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.resolve_dir() == str(tmp_path / "xdg" / "locojax" / "jax-cache")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache.resolve_dir() == str(tmp_path / "jax")
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "env"))
    assert compile_cache.resolve_dir() == str(tmp_path / "env")
    assert compile_cache.resolve_dir(str(tmp_path / "flag")) == str(tmp_path / "flag")
    for off in ("", "off", "OFF"):
        assert compile_cache.resolve_dir(off) is None
        monkeypatch.setenv(compile_cache.ENV_VAR, off)
        assert compile_cache.resolve_dir() is None
    assert compile_cache.resolve_dir(str(tmp_path / "flag")) == str(tmp_path / "flag")  # the flag wins


def test_every_entry_point_takes_the_flag(tmp_path):
    import jax

    from experiments import benchmark, cli, describe, evaluate, render, train

    before = jax.config.jax_compilation_cache_dir
    entry_points = {train: (["--workdir=x", "--config=locosplat_tiny"], "required"),
                    evaluate: (["--workdir=x", "--config=locosplat_tiny"], "required"),
                    render: (["--workdir=x"], "none"), describe: (["--config=locosplat_tiny"], "required")}
    try:
        for module, (argv, config) in entry_points.items():
            path = tmp_path / module.__name__
            args = cli.parse([f"--jax_cache_dir={path}", *argv], module._define_flags, doc="", config=config)
            assert not isinstance(args, int), module.__name__
            assert jax.config.jax_compilation_cache_dir == str(path) and path.is_dir()
        with pytest.raises(SystemExit):  # (argparse's --help) after the cache is set up
            benchmark.main(["compile", f"--jax_cache_dir={tmp_path / 'bench'}", "--help"])
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "bench")
        assert not isinstance(cli.parse(["--jax_cache_dir=off", "--workdir=x"], render._define_flags, doc="",
                                         config="none"), int)
        assert jax.config.jax_compilation_cache_dir is None
        blocked = tmp_path / "file"
        blocked.write_text("")
        assert cli.parse([f"--jax_cache_dir={blocked / 'sub'}", "--workdir=x"], render._define_flags, doc="",
                         config="none") == 2
    finally:
        os.environ.pop(compile_cache.ENV_VAR, None)  # (set by benchmark.main for its module)
        compile_cache.enable(before or "off")


def _run(cache, *argv):
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # not the suite's shared cache: this test counts entries
    # Every executable is written, however fast it compiles: the toy model's steps take well under the
    # default threshold, the real presets' tens of seconds to minutes.
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1",
               LOCOJAX_JAX_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    p = subprocess.run([sys.executable, DRIVER, *argv, *ARGS], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def _setup_record(workdir):
    with open(workdir / "metrics.jsonl") as f:
        (setup,) = [r for r in map(json.loads, f) if r.get("split") == "setup"]
    return setup


def test_second_run_loads_every_executable_and_another_config_does_not(tmp_path):
    cache = tmp_path / "cache"
    _run(cache, str(tmp_path / "a"))
    first = _setup_record(tmp_path / "a")
    entries = compile_cache.num_entries(str(cache))
    # the train step, predict and render+metrics at least, each written once
    assert first["compile_cache_hits"] == 0 and first["compile_cache_writes"] == entries >= 3, first

    # A new process: the same config again, then (same process) another model size.
    out = _run(cache, f"--runs={tmp_path / 'b'}:;{tmp_path / 'c'}:model.hidden=24")
    second = _setup_record(tmp_path / "b")
    assert second["compile_cache_writes"] == 0 and second["compile_cache_hits"] == entries, second
    assert f"{entries} executables loaded, 0 written" in out
    # Loading is not compiling: the toy's XLA time drops to reading the files back.
    assert second["compile_seconds"] < 0.5 * first["compile_seconds"], (first, second)

    # Another model size lowers to another HLO: its train step and predict are new entries, never
    # the first config's executables.
    third = _setup_record(tmp_path / "c")
    assert third["compile_cache_writes"] >= 2, third
    assert compile_cache.num_entries(str(cache)) == entries + third["compile_cache_writes"]


def test_background_compile_gives_the_exact_spec_executable_and_reraises_errors():
    import jax
    import jax.numpy as jnp

    from locojax.train.background_compile import BackgroundCompile

    x = jnp.arange(4.0)
    compiled = BackgroundCompile(jax.jit(lambda a, b: a * b), x, x).result()
    assert jnp.array_equal(compiled(x, x), x * x)
    with pytest.raises(TypeError):  # another dtype never compiles a second program silently
        compiled(x.astype(jnp.int32), x)

    def bad(a):
        raise ValueError("traced on the background thread")

    pending = BackgroundCompile(jax.jit(bad), x)
    with pytest.raises(ValueError, match="background thread"):
        pending.result()
