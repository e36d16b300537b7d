"""Evaluation protocols by name: which dataset, which index (context/target frames per scene).

Index files (copies in data_pipelines/eval_index/, provenance in its PROVENANCE.md) map
scene key -> {"context": [...], "target": [...]} or null (a scene the protocol skips; null entries
are not counted as missing). C3G's multi-view protocol (used by GlobalSplat) is *constructed* from
the NoPoSplat two-view index: context = floor(linspace(L, R, N)) (float64), same 3 targets; tests
check it against GlobalSplat's precomputed files (identical for all 5601 RE10K / 1341 ACID keys).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Optional

import numpy as np

from data_pipelines.errors import UnknownProtocolError

INDEX_DIR = Path(__file__).resolve().parent / "eval_index"


@dataclasses.dataclass(frozen=True)
class Protocol:
    name: str
    dataset: str
    index_file: Optional[str]      # relative to INDEX_DIR; None for constructed indices
    num_context_views: Optional[int]
    description: str
    # C3G protocols: the NoPoSplat 2-view index (relative to INDEX_DIR) their index is constructed from.
    base_index: Optional[str] = None
    # The index is constructed from the dataset's test split (`synthetic_index`, by the eval iterator).
    from_dataset: bool = False


PROTOCOLS = {p.name: p for p in [
    Protocol("pixelsplat_2v", "re10k", "pixelsplat/evaluation_index_re10k.json", 2, "pixelSplat RE10K 2 views, 3 targets"),
    Protocol("pixelsplat_acid_2v", "acid", "pixelsplat/evaluation_index_acid.json", 2, "pixelSplat ACID 2 views"),
    Protocol("noposplat_2v", "re10k", "noposplat/evaluation_index_re10k.json", 2, "NoPoSplat RE10K 2 views"),
    Protocol("volsplat_6v", "re10k", "volsplat/evaluation_index_re10k.json", 6, "VolSplat RE10K 6 views, 8 targets"),
    Protocol("volsplat_12v", "re10k", "volsplat/re10k_ctx_12v_tgt_8v_n50.json", 12, "VolSplat RE10K 12 views"),
    Protocol("volsplat_24v", "re10k", "volsplat/re10k_ctx_24v_tgt_8v_n50.json", 24, "VolSplat RE10K 24 views"),
    Protocol("volsplat_acid_6v", "acid", "volsplat/evaluation_index_acid.json", 6, "VolSplat ACID 6 views (zero-shot)"),
    Protocol("scannet_6v", "scannet", "volsplat/evaluation_index_scannet.json", 6, "VolSplat's ScanNet index (FreeSplat protocol), 72 sequences"),
    Protocol("freesplat_2v", "scannet", "freesplat/evaluation_index_scannet_2views.json", 2, "FreeSplat ScanNet 2 views"),
    Protocol("freesplat_3v", "scannet", "freesplat/evaluation_index_scannet_3views.json", 3, "FreeSplat ScanNet 3 views"),
    Protocol("freesplat_10v", "scannet", "freesplat/evaluation_index_scannet_10views.json", 10, "FreeSplat ScanNet 10 views"),
    Protocol("dl3dv_2v", "dl3dv", "depthsplat_dl3dv/dl3dv_start_0_distance_50_ctx_2v_video_0_50.json", 2, "DepthSplat DL3DV 2 views, 50 targets"),
    Protocol("dl3dv_4v", "dl3dv", "depthsplat_dl3dv/dl3dv_start_0_distance_50_ctx_4v_video_0_50.json", 4, "DepthSplat DL3DV 4 views"),
    Protocol("dl3dv_6v", "dl3dv", "depthsplat_dl3dv/dl3dv_start_0_distance_50_ctx_6v_video_0_50.json", 6, "DepthSplat DL3DV 6 views"),
    Protocol("dl3dv_10_2v4t", "dl3dv", "depthsplat_dl3dv/dl3dv_start_0_distance_10_ctx_2v_tgt_4v.json", 2, "DepthSplat zero-shot RE10K->DL3DV, 2 views, 4 targets"),
] + [
    Protocol(f"c3g_{n}v", "re10k", None, n, f"C3G/GlobalSplat RE10K {n} views (from NoPoSplat's index)",
             base_index="noposplat/evaluation_index_re10k.json") for n in (12, 24, 36)
] + [
    Protocol(f"c3g_acid_{n}v", "acid", None, n, f"C3G/GlobalSplat ACID {n} views",
             base_index="noposplat/evaluation_index_acid.json") for n in (12, 24, 36)
] + [
    Protocol("synthetic", "synthetic", None, None, "fixed index over the synthetic test split (context count from config)",
             from_dataset=True),
]}


@functools.lru_cache(maxsize=None)
def read_index(relative_path: str) -> dict:
    path = INDEX_DIR / relative_path
    if not path.exists():
        raise FileNotFoundError(f"evaluation index {path} is missing")
    with open(path) as f:
        return json.load(f)


def linspace_floor(start: int, end: int, steps: int) -> np.ndarray:
    """floor(linspace(start, end, steps)) in float64. GlobalSplat's precomputed C3G files agree with
    this for every key; a float32 `torch.linspace(...).long()` differs on 93 of the 36-view entries."""
    return np.floor(np.linspace(float(start), float(end), steps)).astype(np.int64)


def c3g_index(base: dict, num_views: int) -> dict:
    """C3G multi-view index from a NoPoSplat-style 2-view index (null entries dropped, as C3G does)."""
    out = {}
    for key, entry in base.items():
        if entry is None:
            continue
        left, right = entry["context"][0], entry["context"][-1]
        out[key] = {"context": linspace_floor(left, right, num_views).tolist(), "target": list(entry["target"])}
    return out


def synthetic_index(keys: list[str], num_frames: list[int], num_context: int, num_target: int, seed: int = 20240) -> dict:
    """A fixed index over synthetic test scenes: context evenly spaced over a window of
    max(30, 6 * C) frames (clamped to the scene) at a seeded start; targets drawn (seeded) from the
    window's other frames, sorted. Deterministic in (keys, num_frames, C, T, seed)."""
    out = {}
    for i, (key, n) in enumerate(zip(keys, num_frames)):
        rng = np.random.default_rng([seed, i, num_context, num_target])
        gap = min(n - 1, max(30, 6 * num_context))
        left = int(rng.integers(0, n - gap))
        context = np.round(np.linspace(left, left + gap, num_context)).astype(int)
        others = np.setdiff1d(np.arange(left, left + gap + 1), context)
        if len(context) != len(set(context.tolist())) or len(others) < num_target:
            out[key] = None  # too short for this protocol: reported by the iterator
            continue
        target = np.sort(rng.choice(others, size=num_target, replace=False))
        out[key] = {"context": context.tolist(), "target": target.tolist()}
    return out


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise UnknownProtocolError(f"unknown evaluation protocol {name!r} (from config.eval.protocol, data.eval_protocol or --protocol); "
                                   f"known: {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[name]


def protocol_index(protocol: Protocol) -> dict:
    """key -> entry or None, in file order (synthetic has no file: see iterators)."""
    if protocol.index_file is not None:
        return read_index(protocol.index_file)
    if protocol.base_index is not None:
        return c3g_index(read_index(protocol.base_index), protocol.num_context_views)
    raise ValueError(f"protocol {protocol.name!r} is built from the dataset, not an index file")
