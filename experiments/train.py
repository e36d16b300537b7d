"""python -m experiments.train --config=globalsplat_tiny --workdir=DIR [--config.KEY=VALUE ...]

--config: a name (--config=help or --list_configs lists them), configs/<family>.py:<preset>, or a
run's config.json; --print_config prints the resolved config and exits. Rerunning the same command
resumes from the latest checkpoint; cadence and path keys (total_steps, eval_every, data.data_dir, ...)
may change on resume, keys that change the model, optimizer or data are refused.
"""

from __future__ import annotations

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


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__)
    if isinstance(args, int):
        return args
    cli.maybe_initialize_distributed(args)

    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.loop import NonFiniteError, train_and_evaluate
    from locojax.train.run_dir import ConfigMismatchError

    try:
        out = train_and_evaluate(args.config, args.workdir, init_from=args.init_from)
    except (ConfigMismatchError, CorruptCheckpointError, DatasetError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except NonFiniteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    if not out["stopped"] and out["eval"] is not None:  # (a SIGTERM stop was already reported)
        print(f"done: step {out['step']}, held-out PSNR {out['eval']['psnr']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
