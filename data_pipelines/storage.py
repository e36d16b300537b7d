"""Random access to the scene records of one built split (`tfds` array_record data source).

`SceneSource` decodes lazily: `frames(i, idx)` decodes only the requested frames of scene i. Scene i
is the i-th key of the build metadata (`keys_<split>`, so that opening a split reads no record); every
record read is checked against that key, so a build whose records are not in metadata order (locojax
builds before builder version 1.1.0, see docs/data.md) raises `RecordOrderError` instead of returning
another scene's frames.
"""

from __future__ import annotations

import numpy as np

from data_pipelines import encoding
from data_pipelines.errors import CorruptRecordError, RecordOrderError
from data_pipelines.scene import Scene


def _text(x) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


class SceneSource:
    """Scenes of one split: len(), keys, record(i), frames(i, frame_indices), scene(i)."""

    def __init__(self, builder, split: str):
        if split not in builder.info.splits:
            raise ValueError(f"{builder.name}/{builder.builder_config.name if builder.builder_config else ''}: "
                             f"no split {split!r} (have {list(builder.info.splits)})")
        self.builder = builder
        self.split = split
        self._source = builder.as_data_source(split)
        meta = builder.info.metadata or {}
        keys = meta.get(f"keys_{split}") if hasattr(meta, "get") else None
        if keys is None or len(keys) != len(self._source):
            keys = [_text(self.record(i)["key"]) for i in range(len(self._source))]  # slow path: read all
        self.keys = None
        self.keys = list(keys)
        self.index_of = {k: i for i, k in enumerate(self.keys)}
        if len(self.keys):  # fail at open, not mid-run, on a misordered build (every read checks too)
            for i in (0, len(self.keys) - 1):
                try:
                    self.record(i)
                except CorruptRecordError:
                    pass  # reported by the read that needs the record, with its scene
        frames = meta.get(f"frames_{split}") if hasattr(meta, "get") else None
        self._num_frames = list(frames) if frames is not None and len(frames) == len(self.keys) else None

    def __len__(self) -> int:
        return len(self._source)

    def record(self, i: int) -> dict:
        """The raw record of scene i (RecordOrderError if it is not the scene keys[i] names)."""
        try:
            rec = self._source[int(i)]
        except (RuntimeError, OSError, ValueError) as e:  # Riegeli: "Corrupted Riegeli/records file"
            raise CorruptRecordError(self._corrupt_message(int(i), e)) from None
        keys = getattr(self, "keys", None)
        if keys is not None and _text(rec["key"]) != keys[int(i)]:
            raise RecordOrderError(self._order_message(int(i), _text(rec["key"])))
        return rec

    def _order_message(self, i: int, stored: str) -> str:
        from data_pipelines.datasets import rebuild_hint

        name = self.builder.name.replace("locojax_", "")
        return (f"{self.builder.data_dir}: record {i} of split {self.split!r} holds scene {stored!r} but the "
                f"dataset metadata lists {self.keys[i]!r} there (records written out of order, as locojax "
                f"builds before version 1.1.0 did). To fix: {rebuild_hint(name, self.builder)}")

    def _corrupt_message(self, i: int, e: Exception) -> str:
        from data_pipelines.datasets import rebuild_hint

        info = self.builder.info.splits[self.split]
        lengths, paths = list(info.shard_lengths), [str(p) for p in info.filepaths]
        shard, start = 0, 0
        while shard < len(lengths) - 1 and i >= start + lengths[shard]:
            start += lengths[shard]
            shard += 1
        where = paths[shard] if shard < len(paths) else str(self.builder.data_dir)
        keys = getattr(self, "keys", None)
        scene = f" (scene {keys[i]})" if keys and i < len(keys) else ""
        cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        name = self.builder.name.replace("locojax_", "")  # TFDS name locojax_<dataset>
        return (f"corrupt record {i}{scene} of split {self.split!r} in {where}: {cause}. To fix: "
                f"{rebuild_hint(name, self.builder)}")

    def num_frames(self, i: int) -> int:
        """Frame count of scene i (from the build metadata; reads the record only as a fallback)."""
        if self._num_frames is not None:
            return int(self._num_frames[int(i)])
        return len(self.record(i)["images"])

    @staticmethod
    def decode_frames(record: dict, frame_indices) -> np.ndarray:
        """uint8 [K, H, W, 3] of the requested frames (decoded once each, in the given order)."""
        images = record["images"]
        decoded = {}
        for f in frame_indices:
            f = int(f)
            if f not in decoded:
                decoded[f] = encoding.decode_image(images[f])
        return np.stack([decoded[int(f)] for f in frame_indices])

    @staticmethod
    def decode_depth(record: dict, frame_indices):
        depth = record["depth"]
        if len(depth) == 0:
            return None
        units = float(record["depth_units_per_metre"])
        return np.stack([encoding.decode_depth_png(depth[int(f)], units) for f in frame_indices])

    def scene(self, i: int, with_depth: bool = True) -> Scene:
        rec = self.record(i)
        n = len(rec["images"])
        idx = np.arange(n)
        return Scene(
            key=_text(rec["key"]),
            images=self.decode_frames(rec, idx),
            intrinsics=np.asarray(rec["intrinsics"], np.float32),
            c2w=np.asarray(rec["c2w"], np.float32),
            timestamps=np.asarray(rec["timestamps"], np.int64),
            depth=self.decode_depth(rec, idx) if with_depth else None,
            url=_text(rec["url"]),
        )
