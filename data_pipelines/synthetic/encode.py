"""Render + encode one synthetic scene into a record (the build workers' job; no TensorFlow here)."""

from __future__ import annotations

from data_pipelines import encoding
from data_pipelines.records import make_record

DEPTH_UNITS_PER_METRE = 4000.0  # 0.25 mm steps, max 16.38 m in 16 bits
JPEG_QUALITY = 95


def encode_scene(args) -> tuple[str, dict]:
    """Worker: render and encode one scene (top-level so that spawned processes can import it)."""
    from data_pipelines.synthetic.generate import generate_scene

    seed, split, index, height, width, num_frames, store_depth = args
    s = generate_scene(seed, split, index, (height, width), num_frames)
    images = [encoding.encode_jpeg(im, JPEG_QUALITY) for im in s["images"]]
    depth = [encoding.encode_depth_png(d, DEPTH_UNITS_PER_METRE) for d in s["depth"]] if store_depth else []
    record = make_record(s["key"], images, s["intrinsics"], s["c2w"], s["timestamps"], url="",
                         depth=depth, depth_units_per_metre=DEPTH_UNITS_PER_METRE if store_depth else 0.0)
    return s["key"], record
