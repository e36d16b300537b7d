"""`python -m experiments.benchmark`: helper modules are not offered as benchmarks (process_memory
crashed), and a benchmark's --help shows its whole description (render's was cut after one line)."""

from __future__ import annotations

import pytest

from experiments import benchmark


def test_only_modules_with_main_are_benchmarks(capsys):
    names = benchmark.available()
    assert "process_memory" not in names and {"render", "metrics", "train_step"} <= set(names)
    assert benchmark.main(["process_memory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: unknown benchmark 'process_memory'; available: {', '.join(names)}"]


@pytest.mark.parametrize("name, last_words", [("render", "1,572,864 Gaussians into 8 views."),
                                              ("metrics", "(first call, i.e. compile, separately)")])
def test_help_is_not_cut(name, last_words, capsys):
    with pytest.raises(SystemExit) as e:
        benchmark.main([name, "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert last_words in out
