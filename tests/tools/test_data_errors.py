"""Data problems that explain themselves in one line, without a traceback, changing no file: an
unknown dataset or evaluation protocol, an unbuilt dataset, a corrupt TFDS record (names the file and
how to rebuild; through baselines and evaluate); and `experiments.baselines --config` measuring
exactly a run's evaluation data."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

from experiments import baselines


def _snapshot(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(root).rglob("*")) if p.is_file()}


def _with(overrides, **kv):
    out = [o for o in overrides if o.split("=")[0] not in kv]
    return [f"--config.{o}" for o in out] + [f"--config.{k}={v}" for k, v in kv.items()]


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def test_baselines_measure_the_runs_evaluation_data(tiny_run, capsys):
    data = pathlib.Path(tiny_run["config"].data.data_dir)
    before = _snapshot(data)
    assert baselines.main(["--config=globalsplat_tiny"] + _with(tiny_run["overrides"])) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    config = tiny_run["config"]
    assert result["image_shape"] == list(config.data.image_shape)  # the run's 32 px, not 256 px
    assert result["num_context_views"] == config.data.num_context_views
    assert result["scenes"] == config.data.synthetic_num_test_scenes
    assert 5.0 < result["psnr_mean_colour"] < 60.0 and 5.0 < result["psnr_nearest_context_view"] < 60.0
    assert baselines.main([f"--workdir={tiny_run['workdir']}"]) == 0  # the run's own config.json
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
    assert _snapshot(data) == before  # the run's cached data was used as it is: nothing built


def test_unknown_and_unbuilt_datasets(tiny_run, tmp_path, capsys):
    from experiments import train

    assert baselines.main(["--config=globalsplat_tiny"] + _with(tiny_run["overrides"], dataset="imagenet")) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: config.dataset='imagenet': unknown dataset; expected one of synthetic, re10k")
    argv = ["--config=globalsplat_tiny", f"--workdir={tmp_path / 'wd1'}"]
    assert train.main(argv + _with(tiny_run["overrides"], dataset="imagenet")) == 2
    assert _one_error_line(capsys.readouterr().err) == line
    # an unknown evaluation protocol fails during setup, not at the step-0 evaluation after config.json
    argv = ["--config=globalsplat_tiny", f"--workdir={tmp_path / 'wd3'}"]
    assert train.main(argv + _with(tiny_run["overrides"], **{"eval.protocol": "nope"})) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: unknown evaluation protocol 'nope' (from config.eval.protocol") and "pixelsplat_2v" in line
    empty = tmp_path / "no_data"
    argv = ["--config=globalsplat_tiny", f"--workdir={tmp_path / 'wd2'}"]
    assert train.main(argv + _with(tiny_run["overrides"], dataset="re10k", **{"data.data_dir": empty})) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: dataset 're10k' is not built under") and "python -m data_pipelines.build re10k" in line
    for wd in ("wd1", "wd2", "wd3"):  # nothing written: a corrected rerun starts clean
        assert not (tmp_path / wd).exists(), wd


def test_corrupt_record_names_file_and_rebuild(tiny_run, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(pathlib.Path(tiny_run["config"].data.data_dir), data)
    (test_file,) = list(data.rglob("*-test.array_record-*"))
    raw = bytearray(test_file.read_bytes())
    for i in range(200, len(raw) - 200, 7):  # flip bits inside the chunk data: its hash no longer matches
        raw[i] ^= 0x5A
    test_file.write_bytes(bytes(raw))
    before = _snapshot(data)
    assert baselines.main(["--config=globalsplat_tiny"] + _with(tiny_run["overrides"], **{"data.data_dir": data})) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: corrupt record 0") and str(test_file) in line, line
    assert f"delete {test_file.parent} and rerun" in line
    from experiments import evaluate

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run["workdir"], wd)
    run_before = _snapshot(wd)
    assert evaluate.main([f"--workdir={wd}", f"--config.data.data_dir={data}"]) == 2
    assert _one_error_line(capsys.readouterr().err) == line
    assert _snapshot(data) == before and _snapshot(wd) == run_before
