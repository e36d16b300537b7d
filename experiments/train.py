"""python -m experiments.train --config=globalsplat_tiny --workdir=DIR [--config.KEY=VALUE ...]

Rerunning the same command resumes from the latest checkpoint; a different config in the same
workdir is refused.
"""

from __future__ import annotations

import argparse
import sys

from experiments import cli


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m experiments.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_common_args(parser)
    parser.add_argument("--init_from", default=None,
                        help="a run directory (e.g. from experiments.import_weights) whose params start this run")
    args, overrides = cli.parse(parser, argv)
    config = cli.resolve_config(args.config, overrides)
    cli.maybe_initialize_distributed(args)

    from locojax.train.loop import NonFiniteError, train_and_evaluate
    from locojax.train.run_dir import ConfigMismatchError

    try:
        out = train_and_evaluate(config, args.workdir, init_from=args.init_from)
    except (ConfigMismatchError, FileNotFoundError) as e:
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
