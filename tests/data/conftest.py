"""Fixtures of the data-pipeline tests: a tiny synthetic dataset (4 train / 2 test scenes, 64x64,
64 frames), built once per session through the TFDS builder. Helpers live in dp_helpers.py."""

from __future__ import annotations

import pytest

from dp_helpers import tiny_config


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory):
    """data_dir holding the tiny synthetic dataset."""
    from data_pipelines.loading import open_split

    root = tmp_path_factory.mktemp("synthetic_data")
    open_split("synthetic", "train", config=tiny_config(root))
    return root
