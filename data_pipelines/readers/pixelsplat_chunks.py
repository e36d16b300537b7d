"""pixelSplat's chunk format (RealEstate10K and ACID, written by dcharatan/real_estate_10k_tools
src/convert.py; DL3DV in DepthSplat's conversion uses the same layout).

A stage folder (`train/`, `test/`) holds `NNNNNN.torch` files and `index.json` (scene key -> chunk
file name). Each chunk is a `torch.save`d list of dicts: url (str), timestamps (int64 [N]),
cameras (float32 [N, 18]: fx fy cx cy normalized, 0 0, then the 3x4 world-to-camera matrix
row-major), images (list of N uint8 1-D tensors, each one frame's JPEG bytes), key (str).
We store c2w = inverse(w2c) (OpenCV) and K normalized, frames sorted by timestamp.

torch is imported here only (lazily), never by training code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Union

import numpy as np

from data_pipelines import encoding
from data_pipelines.readers import Skip
from data_pipelines.records import make_record

CAMERA_ROW = 18


def cameras_to_matrices(cameras: np.ndarray, where: str):
    """[N, 18] pixelSplat camera rows -> (K_norm [N, 3, 3], c2w [N, 4, 4]) float32 (float64 inverse)."""
    cameras = np.asarray(cameras, np.float64)
    if cameras.ndim != 2 or cameras.shape[1] != CAMERA_ROW:
        raise ValueError(f"{where}: camera rows must have {CAMERA_ROW} values (fx fy cx cy 0 0 + 3x4 w2c), "
                         f"got shape {tuple(cameras.shape)}")
    n = cameras.shape[0]
    K = np.tile(np.eye(3), (n, 1, 1))
    K[:, 0, 0], K[:, 1, 1], K[:, 0, 2], K[:, 1, 2] = cameras[:, 0], cameras[:, 1], cameras[:, 2], cameras[:, 3]
    w2c = np.tile(np.eye(4), (n, 1, 1))
    w2c[:, :3, :4] = cameras[:, 6:].reshape(n, 3, 4)
    if not np.isfinite(w2c).all():
        raise ValueError(f"{where}: non-finite camera values")
    det = np.linalg.det(w2c[:, :3, :3])
    if (np.abs(det) < 1e-8).any():
        raise ValueError(f"{where}: singular world-to-camera rotation in frame {int(np.argmin(np.abs(det)))}")
    return K.astype(np.float32), np.linalg.inv(w2c).astype(np.float32)


def _load_chunk(path: Path):
    import torch  # conversion-only dependency

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not a torch chunk"
        raise ValueError(f"{path}: not a readable torch.save file ({type(e).__name__}: {str(e)[:120]})") from e
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of scene dicts, got {type(data).__name__}")
    return data


def _to_numpy(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def convert_example(example, where: str) -> tuple[str, dict]:
    """One chunk entry -> (key, record). Raises ValueError naming `where` and the scene."""
    if not isinstance(example, dict):
        raise ValueError(f"{where}: chunk entry is a {type(example).__name__}, not a dict")
    key = str(example.get("key", ""))
    scene_where = f"{where} scene {key!r}"
    for field in ("key", "timestamps", "cameras", "images"):
        if field not in example:
            raise ValueError(f"{scene_where}: missing field {field!r}")
    timestamps = _to_numpy(example["timestamps"]).astype(np.int64).reshape(-1)
    K, c2w = cameras_to_matrices(_to_numpy(example["cameras"]), scene_where)
    images = [bytes(_to_numpy(im).astype(np.uint8).tobytes()) for im in example["images"]]
    if not (len(images) == len(timestamps) == len(K)):
        raise ValueError(f"{scene_where}: {len(images)} images, {len(timestamps)} timestamps, {len(K)} cameras")
    for i, im in enumerate(images):
        if im[:3] != encoding.JPEG_MAGIC:
            raise ValueError(f"{scene_where}: frame {i} is not a JPEG (first bytes {im[:8]!r})")
    order = np.argsort(timestamps, kind="stable")  # pixelSplat's frames are in timestamp order
    record = make_record(key, [images[i] for i in order], K[order], c2w[order], timestamps[order],
                         url=str(example.get("url", "")))
    return key, record


def iter_stage(stage_dir: Union[str, Path]) -> Iterator[Union[tuple[str, dict], Skip]]:
    """Yield (key, record) for every good scene of a stage folder, `Skip` for every bad one.
    Raises FileNotFoundError if the folder or its index.json is missing."""
    stage_dir = Path(stage_dir)
    if not stage_dir.is_dir():
        raise FileNotFoundError(f"stage folder {stage_dir} does not exist")
    index_path = stage_dir / "index.json"
    if not index_path.exists():
        raise FileNotFoundError(f"{stage_dir} has no index.json (scene key -> chunk file)")
    with open(index_path) as f:
        index = json.load(f)
    chunks = sorted(stage_dir.glob("*.torch"))
    if not chunks:
        raise FileNotFoundError(f"{stage_dir} has no *.torch chunk files")
    seen, reported = set(), set()
    for path in chunks:
        try:
            data = _load_chunk(path)
        except ValueError as e:
            keys = sorted(k for k, v in index.items() if v == path.name)
            reported.update(keys)
            yield Skip(str(path), ",".join(keys) or "?", str(e))
            continue
        for example in data:
            try:
                key, record = convert_example(example, str(path))
            except ValueError as e:
                key = str(example.get("key", "?")) if isinstance(example, dict) else "?"
                reported.add(key)
                yield Skip(str(path), key, str(e))
                continue
            if key in seen:
                yield Skip(str(path), key, "duplicate scene key")
                continue
            if index.get(key) not in (None, path.name):
                yield Skip(str(path), key, f"index.json maps it to {index.get(key)!r}, found in {path.name}")
                continue
            seen.add(key)
            yield key, record
    missing = sorted(k for k in index if k not in seen and k not in reported)
    for key in missing:
        yield Skip(str(index_path), key, f"listed in index.json ({index[key]}) but not found in a readable chunk")
