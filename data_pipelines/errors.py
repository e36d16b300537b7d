"""Data errors that the entry points print as one line (no traceback): each names the config key,
dataset directory or file, and what to do."""

from __future__ import annotations


class DatasetError(Exception):
    """Base class: a dataset that cannot be used as configured."""


class UnknownDatasetError(DatasetError, ValueError):
    pass


class UnknownDataKeyError(DatasetError, ValueError):
    """A `config.data` key that no part of data_pipelines reads (e.g. a misspelling)."""


class DatasetNotBuiltError(DatasetError, FileNotFoundError):
    pass


class CorruptRecordError(DatasetError, OSError):
    pass


class RecordOrderError(DatasetError, ValueError):
    """A record's own key differs from the metadata key at its position (e.g. a shuffled build)."""


class UnknownProtocolError(DatasetError, ValueError):
    pass


class NoEvaluableScenesError(DatasetError, ValueError):
    pass
