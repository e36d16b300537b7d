"""TFDS builder for ScanNet in FreeSplat's layout (see data_pipelines/readers/scannet_freesplat.py)."""

from __future__ import annotations

from data_pipelines.builders.chunks import _ChunkBuilder


class LocojaxScannet(_ChunkBuilder):
    """ScanNet (FreeSplat layout): colour JPEGs, millimetre depth PNGs, c2w extrinsics."""

    MANUAL_DOWNLOAD_INSTRUCTIONS = "manual_dir: train/ and/or test/ folders of FreeSplat-layout ScanNet scenes"

    def _reader(self, stage_dir):
        from data_pipelines.readers.scannet_freesplat import iter_stage

        return iter_stage(stage_dir)
