"""Shared pytest setup.

Tests run on CPU. Multi-device (sharding) tests spawn subprocesses with
XLA_FLAGS=--xla_force_host_platform_device_count=8 so that the rest of the suite keeps one device.
"""

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    return FIXTURES
