"""experiments.cli.OneLineErrors, the entry points' one error path: a known error is one stderr line and
its exit code, matched in order like `except` clauses; anything else keeps its traceback."""

from __future__ import annotations

import pytest

from experiments import cli


class _Stop(RuntimeError):
    pass


def _fail(e: BaseException):
    raise e


@pytest.mark.parametrize("error, code, line", [
    (FileNotFoundError("--workdir=X: no config.json"), 2, "error: --workdir=X: no config.json"),
    (_Stop("stopped at step 3"), 3, "error: stopped at step 3"),
    (ValueError("a ValueError"), 2, "error: a ValueError"),
])
def test_known_errors_are_one_line_with_their_code(error, code, line, capsys):
    with cli.OneLineErrors({(FileNotFoundError, ValueError): 2, _Stop: 3}) as failed:
        _fail(error)
    out = capsys.readouterr()
    assert failed.exit_code == code and out.err == line + "\n" and out.out == ""


def test_first_match_wins_and_message_and_success(capsys):
    with cli.OneLineErrors({KeyError: 4, LookupError: 5}, message=lambda e: str(e).strip("'")) as failed:
        _fail(KeyError("scene_7"))
    assert failed.exit_code == 4 and capsys.readouterr().err == "error: scene_7\n"
    with cli.OneLineErrors({KeyError: 4}) as failed:
        pass
    assert failed.exit_code == 0 and capsys.readouterr().err == ""


def test_other_errors_propagate(capsys):
    with pytest.raises(TypeError, match="a bug"):
        with cli.OneLineErrors({(FileNotFoundError, ValueError): 2}):
            _fail(TypeError("a bug"))
    with pytest.raises(KeyboardInterrupt):
        with cli.OneLineErrors({ValueError: 2}):
            _fail(KeyboardInterrupt())
    assert capsys.readouterr().err == ""
    assert cli.error("x: y", 7) == 7 and capsys.readouterr().err == "error: x: y\n"
