"""Paired per-scene comparison against scipy's paired t-test."""

import json

import numpy as np
import pytest
from scipy import stats

from locojax.metrics import paired


def _write(tmp_path, name, rows, fmt):
    path = tmp_path / name
    if fmt == "csv":
        cols = "scene,psnr,ssim,lpips,num_gaussians,encoder_ms"
        lines = [cols] + [",".join(str(r[c]) for c in cols.split(",")) for r in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(json.dumps(rows))
    return path


def _rows(rng, n, offset):
    return [
        {"scene": f"s{i:03d}", "psnr": 25 + rng.normal() + offset, "ssim": 0.8 + 0.01 * rng.normal(),
         "lpips": 0.2 + 0.01 * rng.normal(), "num_gaussians": 1000, "encoder_ms": 12.5}
        for i in range(n)
    ]


def test_stats_match_scipy_paired_t(tmp_path):
    rng = np.random.default_rng(0)
    rows_a, rows_b = _rows(rng, 40, 0.0), _rows(rng, 40, 0.5)
    a = paired.load_results(_write(tmp_path, "a.csv", rows_a, "csv"))
    b = paired.load_results(_write(tmp_path, "b.json", rows_b[::-1], "json"))  # order must not matter
    res = {s.metric: s for s in paired.compare(a, b, ["psnr", "lpips"])}
    pa = np.array([r["psnr"] for r in rows_a])
    pb = np.array([r["psnr"] for r in rows_b])
    ref = stats.ttest_rel(pb, pa)
    ci = ref.confidence_interval(0.95)
    s = res["psnr"]
    assert s.num_scenes == 40
    np.testing.assert_allclose(s.mean_diff, (pb - pa).mean(), rtol=1e-12)
    np.testing.assert_allclose(s.std_diff, (pb - pa).std(ddof=1), rtol=1e-12)
    np.testing.assert_allclose(s.ci95, (ci.low, ci.high), rtol=1e-9)
    assert s.share_b_better == pytest.approx(np.mean(pb > pa))
    la = np.array([r["lpips"] for r in rows_a])
    lb = np.array([r["lpips"] for r in rows_b])
    assert res["lpips"].share_b_better == pytest.approx(np.mean(lb < la))  # lower LPIPS is better
    assert res["lpips"].share_a_better + res["lpips"].share_b_better + res["lpips"].share_tie == pytest.approx(1)


def test_cli_table_and_errors(tmp_path, capsys):
    rng = np.random.default_rng(1)
    pa = _write(tmp_path, "a.csv", _rows(rng, 5, 0.0), "csv")
    pb = _write(tmp_path, "b.csv", _rows(rng, 5, 1.0), "csv")
    assert paired.main([str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    assert "psnr" in out and "ssim" in out and "lpips" in out and "95% CI" in out
    pc = _write(tmp_path, "c.csv", _rows(rng, 4, 0.0), "csv")
    assert paired.main([str(pa), str(pc)]) == 2  # scene sets differ
    assert "only in A" in capsys.readouterr().err
    assert paired.main([str(pa), str(pc), "--allow-missing"]) == 0
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps([{"scene": "x", "psnr": 1}, {"scene": "x", "psnr": 2}]))
    with pytest.raises(ValueError, match="more than once"):
        paired.load_results(dup)
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"x": {"psnr": 1.0}, "y": {"psnr": 2.0}}))
    assert paired.load_results(nested) == {"x": {"psnr": 1.0}, "y": {"psnr": 2.0}}


def test_evaluator_json_format_and_missing_lpips(tmp_path):
    # locojax.train.evaluate writes {"scenes": [rows], "summary": {...}}; LPIPS may be off (NaN / absent).
    rows_a = [{"scene": "x", "psnr": 20.0, "ssim": 0.5, "lpips": float("nan")},
              {"scene": "y", "psnr": 22.0, "ssim": 0.6}]
    rows_b = [{"scene": "x", "psnr": 21.0, "ssim": 0.5, "lpips": 0.3}, {"scene": "y", "psnr": 21.0, "ssim": 0.7}]
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps({"scenes": rows_a, "summary": {"psnr": 21.0}}))
    pb.write_text(json.dumps({"scenes": rows_b, "summary": {"psnr": 21.0}}))
    res = paired.compare(paired.load_results(pa), paired.load_results(pb))
    assert [s.metric for s in res] == ["psnr", "ssim"]
    assert res[0].mean_diff == pytest.approx(0.0) and res[0].share_a_better == 0.5
    assert res[1].share_tie == 0.5 and res[1].share_b_better == 0.5
    with pytest.raises(ValueError, match="'lpips' missing"):
        paired.compare(paired.load_results(pa), paired.load_results(pb), ["lpips"])
