"""Readers of the public source layouts. Each yields (key, record, source_file) or a `Skip`."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Skip:
    """A scene (or a whole file) left out of a build, with the reason; reported at the end."""
    file: str
    scene: str
    reason: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
