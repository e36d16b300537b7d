"""Writers of the public source layouts and small synthetic scenes for the data-pipeline tests."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ml_collections
import numpy as np
from PIL import Image

TINY = dict(synthetic_num_train_scenes=4, synthetic_num_test_scenes=2, synthetic_image_size=64,
            synthetic_num_frames=64, build_workers=1, prefetch=0)


def tiny_config(data_dir, **data) -> ml_collections.ConfigDict:
    d = dict(TINY, data_dir=str(data_dir), image_shape=(64, 64))
    d.update(data)
    return ml_collections.ConfigDict({"dataset": "synthetic", "batch_size": 2, "seed": 0, "data": d})


def jpeg_bytes(image: np.ndarray, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def camera_rows(K_norm: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """[N, 18] pixelSplat rows: fx fy cx cy 0 0 + row-major 3x4 w2c (inverse computed here)."""
    w2c = np.linalg.inv(c2w.astype(np.float64))
    n = len(c2w)
    rows = np.zeros((n, 18), np.float32)
    rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = K_norm[:, 0, 0], K_norm[:, 1, 1], K_norm[:, 0, 2], K_norm[:, 1, 2]
    rows[:, 6:] = w2c[:, :3, :4].reshape(n, 12)
    return rows


def write_chunks(stage_dir: Path, scenes: list[dict], per_chunk: int = 2) -> None:
    """Write pixelSplat chunks (torch.save'd lists of dicts) + index.json for `scenes`
    (dicts with key, images uint8 [N,H,W,3], intrinsics, c2w, timestamps; or 'raw' overrides)."""
    import torch

    stage_dir.mkdir(parents=True, exist_ok=True)
    index = {}
    for c in range(0, len(scenes), per_chunk):
        name = f"{c // per_chunk:06d}.torch"
        chunk = []
        for s in scenes[c:c + per_chunk]:
            example = {
                "url": f"https://example.invalid/{s['key']}",
                "timestamps": torch.tensor(np.asarray(s["timestamps"], np.int64)),
                "cameras": torch.tensor(s.get("cameras", camera_rows(s["intrinsics"], s["c2w"]))),
                "images": [torch.tensor(np.frombuffer(b, np.uint8).copy()) for b in s["jpegs"]],
                "key": s["key"],
            }
            chunk.append(example)
            index[s["key"]] = name
        torch.save(chunk, stage_dir / name)
    (stage_dir / "index.json").write_text(json.dumps(index))


def small_scene(key: str, index: int, size=(36, 64), num_frames=24, seed=5, split="test") -> dict:
    """A synthetic scene at RealEstate10K's aspect ratio, JPEG-encoded frames."""
    from data_pipelines.synthetic.generate import generate_scene

    s = generate_scene(seed, split, index, size, num_frames)
    s["key"] = key
    s["jpegs"] = [jpeg_bytes(im) for im in s["images"]]
    return s
