"""Evaluation index files and the C3G multi-view construction."""

import numpy as np
import pytest

from data_pipelines import protocols


@pytest.mark.parametrize("dataset,count", [("re10k", 5601), ("acid", 1341)])
def test_c3g_construction_matches_globalsplat_files(dataset, count):
    base = protocols.read_index(f"noposplat/evaluation_index_{dataset}.json")
    for n in (12, 24, 36):
        ours = protocols.c3g_index(base, n)
        ref = protocols.read_index(f"c3g_globalsplat/c3g_{dataset}_ctx_{n}v_trg_3v.json")
        assert len(ours) == len(ref) == count
        assert ours == ref
        name = f"c3g_{n}v" if dataset == "re10k" else f"c3g_acid_{n}v"
        assert protocols.protocol_index(protocols.get_protocol(name)) == ref


@pytest.mark.parametrize("name,entries,ctx,tgt", [
    ("pixelsplat_2v", 7194, 2, 3), ("volsplat_6v", 7128, 6, 8), ("volsplat_12v", 7015, 12, 8),
    ("volsplat_24v", 6790, 24, 8), ("volsplat_acid_6v", 1948, 6, 8), ("scannet_6v", 72, 6, 8),
    ("dl3dv_2v", 140, 2, 50), ("dl3dv_4v", 140, 4, 50), ("dl3dv_6v", 140, 6, 50), ("dl3dv_10_2v4t", None, 2, 4),
])
def test_index_files(name, entries, ctx, tgt):
    p = protocols.get_protocol(name)
    index = protocols.protocol_index(p)
    if entries is not None:
        assert len(index) == entries
    for e in index.values():
        if e is None:
            continue
        assert len(e["context"]) == ctx == p.num_context_views and len(e["target"]) == tgt
        assert e["context"] == sorted(e["context"])


def test_synthetic_index_deterministic():
    keys = [f"k{i}" for i in range(5)]
    a = protocols.synthetic_index(keys, [64] * 5, 6, 4)
    assert a == protocols.synthetic_index(keys, [64] * 5, 6, 4)
    for e in a.values():
        assert len(set(e["context"])) == 6 and not set(e["context"]) & set(e["target"])
        assert e["context"][0] < min(e["target"]) and max(e["target"]) < e["context"][-1]
    assert protocols.synthetic_index(["short"], [5], 6, 4)["short"] is None


def test_unknown_protocol_named():
    with pytest.raises(ValueError, match="unknown evaluation protocol 'nope'"):
        protocols.get_protocol("nope")


@pytest.mark.parametrize("name", ["pixelsplat_2v", "c3g_12v", "c3g_36v", "scannet_6v"])
def test_interpolation_protocols_keep_targets_between_context_ends(name):
    """Like the training samplers (targets drawn in [left, right]), these indices interpolate."""
    for e in protocols.protocol_index(protocols.get_protocol(name)).values():
        if e is not None:
            assert e["context"][0] <= min(e["target"]) and max(e["target"]) <= e["context"][-1]
