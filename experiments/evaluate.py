"""python -m experiments.evaluate --config=NAME --workdir=DIR [--step=N] [--protocol=NAME]
                                  [--export_ply [--ply_scenes=KEY,KEY | --ply_count=K]]
                                  [--compare=OTHER_RESULTS.json]

Restores checkpoint N (default: the latest) of the run in DIR, evaluates it on a protocol
(default: the config's), writes per-scene CSV/JSON under DIR/eval/, prints a summary table, and with
--export_ply writes the chosen scenes' Gaussians as standard 3DGS .ply files under DIR/ply/.
"""

from __future__ import annotations

import argparse
import sys

from experiments import cli


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_common_args(parser)
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--protocol", default=None, help="pixelsplat_2v, volsplat_6v, ..., synthetic")
    parser.add_argument("--export_ply", action="store_true", help="write predicted Gaussians as .ply")
    parser.add_argument("--ply_scenes", default=None, help="comma-separated scene keys to export")
    parser.add_argument("--ply_count", type=int, default=1, help="export the first K scenes (default 1)")
    parser.add_argument("--compare", default=None,
                        help="a results .json of another run: paired comparison (locojax.metrics.paired)")
    args, overrides = cli.parse(parser, argv)
    config = cli.resolve_config(args.config, overrides)
    cli.maybe_initialize_distributed(args)

    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.eval_run import evaluate_checkpoint
    from locojax.train.run_dir import ConfigMismatchError

    export = None
    if args.export_ply:
        export = [s for s in args.ply_scenes.split(",") if s] if args.ply_scenes else args.ply_count
    try:
        out = evaluate_checkpoint(config, args.workdir, step=args.step, protocol=args.protocol,
                                  export_ply=export)
    except (ConfigMismatchError, CorruptCheckpointError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.compare:
        from locojax.train.compare import print_paired_comparison

        print_paired_comparison(out["json"], args.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
