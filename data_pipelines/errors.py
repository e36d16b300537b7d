"""Data errors that the entry points print as one line (no traceback): each names the config key,
dataset directory or file, and what to do."""

from __future__ import annotations


class DatasetError(Exception):
    """Base class: a dataset that cannot be used as configured."""


class UnknownDatasetError(DatasetError, ValueError):
    pass


class DatasetNotBuiltError(DatasetError, FileNotFoundError):
    pass


class CorruptRecordError(DatasetError, OSError):
    pass
