"""python -m experiments.train --config=globalsplat_tiny --workdir=DIR [--config.KEY=VALUE ...]

--config: a name (--config=help or --list_configs lists them), configs/<family>.py:<preset>, or a
run's config.json (the default when DIR has one); --print_config prints the resolved config and exits.
Rerunning the same command (or just --workdir=DIR) resumes from the latest checkpoint; cadence and
path keys (total_steps, eval_every, data.data_dir, ...) may change on resume, e.g.
`--workdir=DIR --config.total_steps=N` trains longer; keys that change the model, optimizer or data
are refused.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "run directory (checkpoints, logs, config.json) " + cli.REQUIRED,
                        flag_values=fv)
    flags.DEFINE_string("init_from", None,
                        "a run directory (e.g. from experiments.import_weights) whose params start this run",
                        flag_values=fv)
    cli.define_distributed_flags(fv)


def _run_config(known) -> str | None:
    """Without --config: the run's own config.json when the workdir has one (resume as it was)."""
    workdir = known["workdir"].value
    path = os.path.join(workdir, "config.json") if workdir else None
    return path if path and os.path.exists(path) else None


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config_default=_run_config)
    if isinstance(args, int):
        return args
    cli.maybe_initialize_distributed(args)

    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.import_run import ParamsMismatchError
    from locojax.train.loop import NonFiniteError, train_and_evaluate
    from locojax.train.run_dir import ConfigMismatchError

    with cli.OneLineErrors({(ConfigMismatchError, CorruptCheckpointError, DatasetError, FileNotFoundError,
                             ParamsMismatchError): 2, NonFiniteError: 3}) as failed:
        out = train_and_evaluate(args.config, args.workdir, init_from=args.init_from)
    if failed.exit_code:
        return failed.exit_code
    if not out["stopped"] and out["eval"] is not None:  # (a SIGTERM stop was already reported)
        print(f"done: step {out['step']}, held-out PSNR {out['eval']['psnr']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
