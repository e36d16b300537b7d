"""`python -m experiments.benchmark`: helper modules are not offered as benchmarks (process_memory
crashed), a benchmark's --help shows its whole description (render's was cut after one line), and an
unknown --config is one line."""

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
                                              ("metrics", "(first call, i.e. compile, separately)"),
                                              ("globalsplat", "also write the report as JSON here"),
                                              ("locosplat", "float32 warping, depth and 3D stage (B.1)."),
                                              ("train_step", "print the resolved config (after overrides) and exit")])
def test_help_is_not_cut(name, last_words, capsys):
    try:  # argparse benchmarks exit, absl ones (train_step) return
        rc = benchmark.main([name, "--help"])
    except SystemExit as e:
        rc = e.code
    assert rc == 0
    out = " ".join(capsys.readouterr().out.split())
    assert last_words in out


@pytest.mark.parametrize("name", ["globalsplat", "train_step"])
def test_unknown_config_is_one_line(name, capsys):
    assert benchmark.main([name, "--config=nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --config=nope: Unknown config 'nope'") and "globalsplat_16k" in err[0]


def test_train_step_defaults_to_a_cpu_sized_preset(capsys):
    """Without --config, train_step resolves globalsplat_tiny (the 16k preset does not fit a 2-core CPU)."""
    import configs
    from experiments.cli import format_config

    assert benchmark.main(["train_step", "--print_config"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == format_config(configs.get_config("globalsplat_tiny")).strip()
    assert out.strip() != format_config(configs.get_config("globalsplat_16k")).strip()
