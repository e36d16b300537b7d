"""ScanNet in FreeSplat's layout (wangys16/FreeSplat src/dataset/dataset_scannet.py).

manual_dir/{train,test}/<scene>/ with color/{i}.jpg, depth/{i}.png (uint16 millimetres),
intrinsic/intrinsic_color.txt (4x4, pixels of the colour frames), extrinsics.npy ([N, 4, 4],
OpenCV camera-to-world: FreeSplat passes it on as pixelSplat "extrinsics", which are c2w). An
optional manual_dir/{stage}_idx.txt lists the scenes (else every sub-folder). Intrinsics are
normalized by the colour frame size (as FreeSplat does); frame i's timestamp is i. FreeSplat
resizes colour and depth to 640x480 before its crop shim: the iterators do the same
(`PRE_RESIZE`). Evaluation index keys are "<scene>_<k>" (FreeSplat strips the suffix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Union

import numpy as np
from PIL import Image

from data_pipelines import encoding
from data_pipelines.readers import Skip
from data_pipelines.records import make_record

DEPTH_UNITS_PER_METRE = 1000.0
PRE_RESIZE = (480, 640)  # (H, W)


def scene_folders(stage_dir: Path) -> list[Path]:
    idx = stage_dir.parent / f"{stage_dir.name}_idx.txt"
    if idx.exists():
        names = [line.strip() for line in idx.read_text().splitlines() if line.strip()]
        return [stage_dir / n for n in names]
    return sorted(p for p in stage_dir.iterdir() if p.is_dir())


def read_scene(folder: Path) -> tuple[str, dict]:
    key = folder.name
    where = f"{folder} (scene {key!r})"
    if not folder.is_dir():
        raise ValueError(f"{where}: folder does not exist")
    ext_path = folder / "extrinsics.npy"
    k_path = folder / "intrinsic" / "intrinsic_color.txt"
    for p in (ext_path, k_path):
        if not p.exists():
            raise ValueError(f"{where}: missing {p.relative_to(folder)}")
    c2w = np.load(ext_path).astype(np.float64)
    if c2w.ndim != 3 or c2w.shape[1:] != (4, 4):
        raise ValueError(f"{where}: extrinsics.npy must be [N, 4, 4], got {c2w.shape}")
    n = c2w.shape[0]
    K_pix = np.loadtxt(k_path)
    if K_pix.shape not in ((4, 4), (3, 3)):
        raise ValueError(f"{where}: intrinsic_color.txt must be 3x3 or 4x4, got {K_pix.shape}")
    images, depth = [], []
    for i in range(n):
        path = folder / "color" / f"{i}.jpg"
        if not path.exists():
            raise ValueError(f"{where}: missing color/{i}.jpg ({n} poses)")
        data = path.read_bytes()
        if data[:3] != encoding.JPEG_MAGIC:
            raise ValueError(f"{where}: color/{i}.jpg is not a JPEG")
        images.append(data)
        dpath = folder / "depth" / f"{i}.png"
        if dpath.exists():
            d = dpath.read_bytes()
            if d[:8] != encoding.PNG_MAGIC:
                raise ValueError(f"{where}: depth/{i}.png is not a PNG")
            depth.append(d)
    if depth and len(depth) != n:
        raise ValueError(f"{where}: {len(depth)} depth maps for {n} frames")
    with Image.open(folder / "color" / "0.jpg") as im:
        width, height = im.size
    K = np.array(K_pix[:3, :3], np.float64)
    K[0] /= width
    K[1] /= height
    valid = np.isfinite(c2w).all(axis=(1, 2))
    if not valid.all():  # ScanNet marks lost tracking with inf/nan poses
        raise ValueError(f"{where}: {int((~valid).sum())} frames have non-finite poses (first {int(np.argmin(valid))})")
    record = make_record(key, images, np.repeat(K[None], n, 0), c2w, np.arange(n),
                         depth=depth, depth_units_per_metre=DEPTH_UNITS_PER_METRE if depth else 0.0)
    return key, record


def iter_stage(stage_dir: Union[str, Path]) -> Iterator[Union[tuple[str, dict], Skip]]:
    stage_dir = Path(stage_dir)
    if not stage_dir.is_dir():
        raise FileNotFoundError(f"stage folder {stage_dir} does not exist")
    for folder in scene_folders(stage_dir):
        try:
            yield read_scene(folder)
        except (ValueError, OSError) as e:
            yield Skip(str(folder), folder.name, str(e))


def eval_key_to_scene(key: str) -> str:
    """FreeSplat/VolSplat ScanNet index keys "scene0553_00_0" -> scene folder "scene0553_00"."""
    return key.rsplit("_", 1)[0]
