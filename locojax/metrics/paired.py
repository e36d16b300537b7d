"""Paired per-scene comparison of two evaluation runs (LoCoSplat's statistical protocol).

Two result files list one row per scene (CSV with a header, or JSON: a list of row objects, or an
object {"scenes": [...]} / {scene: {metric: value}}); the evaluator's format is
`scene,psnr,ssim,lpips,num_gaussians,encoder_ms`. For each metric over the scenes both files share:
the mean paired difference B - A, its standard deviation, a 95% t confidence interval of the mean, and
the share of scenes where A is better, B is better, or they tie (PSNR/SSIM: higher is better; LPIPS,
encoder_ms, num_gaussians: lower is better).

    python -m locojax.metrics.paired A.csv B.json [--metrics psnr ssim lpips] [--allow-missing]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import pathlib
import sys

import numpy as np

HIGHER_IS_BETTER = {"psnr": True, "ssim": True, "lpips": False, "encoder_ms": False, "num_gaussians": False}
DEFAULT_METRICS = ("psnr", "ssim", "lpips")


@dataclasses.dataclass(frozen=True)
class PairedStats:
    metric: str
    num_scenes: int
    mean_a: float
    mean_b: float
    mean_diff: float  # mean of (B - A)
    std_diff: float  # sample std (ddof=1) of (B - A); 0 for one scene
    ci95: tuple[float, float]  # t interval of the mean difference
    share_a_better: float
    share_b_better: float
    share_tie: float


def load_results(path) -> dict[str, dict[str, float]]:
    """{scene: {metric: value}} from a per-scene CSV or JSON file. Duplicate scenes are an error."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results file {path} does not exist")
    text = path.read_text()
    if path.suffix.lower() == ".json" or text.lstrip().startswith(("[", "{")):
        data = json.loads(text)
        if isinstance(data, dict) and "scenes" in data:
            data = data["scenes"]
        if isinstance(data, dict):
            rows = [{"scene": k, **v} for k, v in data.items()]
        elif isinstance(data, list):
            rows = data
        else:
            raise ValueError(f"{path}: JSON must be a list of rows or an object of scenes")
    else:
        rows = list(csv.DictReader(text.splitlines()))
    out: dict[str, dict[str, float]] = {}
    for i, row in enumerate(rows):
        if "scene" not in row:
            raise ValueError(f"{path}: row {i} has no 'scene' column (columns: {sorted(row)})")
        scene = str(row["scene"])
        if scene in out:
            raise ValueError(f"{path}: scene {scene!r} appears more than once")
        values = {}
        for k, v in row.items():
            if k == "scene" or v is None or v == "":
                continue
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue  # non-numeric extra columns are ignored
            if not math.isnan(value):  # NaN = not measured (e.g. LPIPS switched off)
                values[k] = value
        out[scene] = values
    if not out:
        raise ValueError(f"{path}: no scenes")
    return out


def paired_stats(a: np.ndarray, b: np.ndarray, metric: str, higher_is_better: bool) -> PairedStats:
    """Statistics of the per-scene differences b - a (arrays [S], same scene order)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    n = a.size
    diff = b - a
    mean = float(diff.mean())
    std = float(diff.std(ddof=1)) if n > 1 else 0.0
    if n > 1:
        from scipy.stats import t as student_t

        half = float(student_t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    else:
        half = math.inf
    b_better = diff > 0 if higher_is_better else diff < 0
    a_better = diff < 0 if higher_is_better else diff > 0
    return PairedStats(
        metric=metric,
        num_scenes=n,
        mean_a=float(a.mean()),
        mean_b=float(b.mean()),
        mean_diff=mean,
        std_diff=std,
        ci95=(mean - half, mean + half),
        share_a_better=float(a_better.mean()),
        share_b_better=float(b_better.mean()),
        share_tie=float((diff == 0).mean()),
    )


def compare(results_a: dict, results_b: dict, metrics=None, allow_missing: bool = False):
    """Paired statistics per metric over the scenes both runs share.

    `metrics=None` compares those of psnr/ssim/lpips that every shared scene of both runs has (an
    evaluation run without LPIPS still compares PSNR and SSIM); metrics named explicitly must exist.
    Unless `allow_missing`, both runs must cover exactly the same scenes (a paired comparison over
    silently different scene sets is not paired).
    """
    only_a = sorted(set(results_a) - set(results_b))
    only_b = sorted(set(results_b) - set(results_a))
    if (only_a or only_b) and not allow_missing:
        raise ValueError(
            f"scene sets differ: {len(only_a)} only in A (e.g. {only_a[:3]}), {len(only_b)} only in B "
            f"(e.g. {only_b[:3]}); pass allow_missing=True / --allow-missing to compare the shared ones"
        )
    scenes = sorted(set(results_a) & set(results_b))
    if not scenes:
        raise ValueError("the two result files share no scenes")
    has = lambda s, m: m in results_a[s] and m in results_b[s]  # noqa: E731
    if metrics is None:
        metrics = [m for m in DEFAULT_METRICS if all(has(s, m) for s in scenes)]
        if not metrics:
            raise ValueError(f"no metric of {DEFAULT_METRICS} is present for every shared scene")
    stats = []
    for metric in metrics:
        if metric not in HIGHER_IS_BETTER:
            raise ValueError(f"unknown metric {metric!r}; known: {sorted(HIGHER_IS_BETTER)}")
        missing = [s for s in scenes if not has(s, metric)]
        if missing:
            raise ValueError(f"metric {metric!r} missing for scene {missing[0]!r} ({len(missing)} scenes)")
        a = np.array([results_a[s][metric] for s in scenes])
        b = np.array([results_b[s][metric] for s in scenes])
        stats.append(paired_stats(a, b, metric, HIGHER_IS_BETTER[metric]))
    return stats


def format_table(stats, name_a: str = "A", name_b: str = "B") -> str:
    header = (
        f"{'metric':<12}{'scenes':>7}{'mean A':>14}{'mean B':>14}{'B-A':>10}{'std':>9}"
        f"{'95% CI':>22}{'A better':>10}{'B better':>10}{'tie':>7}"
    )
    lines = [f"A = {name_a}", f"B = {name_b}", header]
    for s in stats:
        ci = f"[{s.ci95[0]:+.4f}, {s.ci95[1]:+.4f}]"
        lines.append(
            f"{s.metric:<12}{s.num_scenes:>7}{s.mean_a:>14.4f}{s.mean_b:>14.4f}{s.mean_diff:>+10.4f}"
            f"{s.std_diff:>9.4f}{ci:>22}{s.share_a_better:>10.1%}{s.share_b_better:>10.1%}{s.share_tie:>7.1%}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m locojax.metrics.paired", description=__doc__.split("\n")[0])
    parser.add_argument("a", help="per-scene results of run A (CSV or JSON)")
    parser.add_argument("b", help="per-scene results of run B (CSV or JSON)")
    parser.add_argument("--metrics", nargs="+", default=None, choices=sorted(HIGHER_IS_BETTER),
                        help="default: those of psnr, ssim, lpips that both files have for every scene")
    parser.add_argument("--allow-missing", action="store_true", help="compare only the scenes both files have")
    args = parser.parse_args(argv)
    try:
        stats = compare(load_results(args.a), load_results(args.b), args.metrics, args.allow_missing)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(stats, args.a, args.b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
