"""Paired comparison of two per-scene result files (the statistics live in locojax.metrics.paired)."""

from __future__ import annotations


def print_paired_comparison(path_a: str, path_b: str, allow_missing: bool = True) -> str:
    from locojax.metrics import paired

    stats = paired.compare(paired.load_results(path_a), paired.load_results(path_b),
                           allow_missing=allow_missing)
    table = paired.format_table(stats, path_a, path_b)
    print(table)
    return table
