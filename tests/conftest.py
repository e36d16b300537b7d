"""Shared pytest setup.

Tests run on CPU. Multi-device (sharding) tests spawn subprocesses with
XLA_FLAGS=--xla_force_host_platform_device_count=8 so that the rest of the suite keeps one device.
"""

import hashlib
import os
import pathlib
import sys
import tempfile

import pytest

from experiments.benchmarks.process_memory import release_freed_memory

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One persistent XLA compilation cache per checkout, inherited by the subprocess tests (resume,
# SIGKILL, multi-process, 8-device): they compile the same train steps as the in-process tests, and
# on a 2-core CI machine XLA compiles dominate the suite's time. Keys include the full HLO, so a code
# change can never be served a stale executable.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), "locojax-test-xla-cache-" + hashlib.sha1(str(REPO_ROOT).encode()).hexdigest()[:12]),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    return FIXTURES


def pytest_configure(config):
    config.addinivalue_line("markers", "long_running: a test of several minutes; scheduled first")


def pytest_collection_modifyitems(config, items):
    # Long tests first: with pytest-xdist they then overlap the rest of the suite on the other
    # worker instead of extending the run at its end (stable sort keeps the order otherwise).
    items.sort(key=lambda item: 0 if item.get_closest_marker("long_running") else 1)


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_executables():
    """After each test module: drop JAX's in-memory executable caches and give the freed heap back.

    An xdist worker otherwise keeps every executable of every module it ran (LPIPS at 256^2 alone is
    ~200 MB) and grew to 6 GB. Beside the other worker's full-size 16k compile (then 16 GB) that left
    the 24 GB CI machine under 2 GB, and it thrashed. Later modules that need the same function
    again hit the persistent compilation cache above."""
    yield
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
    release_freed_memory()


TINY_RUN_OVERRIDES = (
    "total_steps=2", "log_every=1", "eval_every=2", "checkpoint_every=1", "keep_checkpoints=3",
    "eval.lpips=false", "eval.num_sample_images=1", "progress_bar=false",
    # As tests/train/test_train_globalsplat_e2e.py: same compiled functions (persistent cache hits).
    "model.stage_boundaries=(2,4,6)", "model.stage_ramp_steps=1", "data.synthetic_num_train_scenes=4", "data.synthetic_num_test_scenes=2",
    "data.synthetic_image_size=32", "data.synthetic_num_frames=16", "data.image_shape=(32,32)",
    # The tools under test do not depend on the model size: 64 x 4 Gaussians keep the suite fast.
    "model.num_latents=64", "model.gaussians_per_token=4",
)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """One globalsplat_tiny run trained for 2 steps on 32 px synthetic scenes (checkpoints at steps
    1 and 2), shared by the tests of the tools that use a trained model. Tests that alter a run
    copy `workdir` first (`shutil.copytree`)."""
    import configs
    from locojax.train.loop import train_and_evaluate

    root = tmp_path_factory.mktemp("tiny_run")
    overrides = list(TINY_RUN_OVERRIDES) + [f"data.data_dir={root / 'data'}"]
    config = configs.get_config("globalsplat_tiny")
    configs.apply_overrides(config, overrides)
    train_and_evaluate(config, str(root / "wd"))
    return dict(workdir=root / "wd", config=config, overrides=overrides)
