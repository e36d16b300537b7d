"""python -m experiments.evaluate --workdir=DIR [--config=NAME] [--step=N] [--protocol=NAME]
                                  [--num_scenes=K] [--export_ply [--ply_scenes=KEY,KEY | --ply_count=K]]
                                  [--compare=OTHER_RESULTS.json]

Restores checkpoint N (default: the latest) of the run in DIR, evaluates it on a protocol
(default: the config's), writes per-scene CSV/JSON under DIR/eval/, prints a summary table, and with
--export_ply writes the chosen scenes' Gaussians as standard 3DGS .ply files under DIR/ply/.

--config defaults to the run's own DIR/config.json; a given config (and --config.KEY overrides) may
differ from it only in evaluation keys (eval.*, data.eval_*) and cadence/path keys.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "the run directory (config.json + checkpoints/) " + cli.REQUIRED,
                        flag_values=fv)
    flags.DEFINE_integer("step", None, "checkpoint step (default: the latest)", flag_values=fv)
    flags.DEFINE_string("protocol", None, "pixelsplat_2v, volsplat_6v, ..., synthetic (default: the config's)",
                        flag_values=fv)
    flags.DEFINE_integer("num_scenes", None, "evaluate the first K scenes of the protocol", flag_values=fv)
    flags.DEFINE_boolean("export_ply", False, "write predicted Gaussians as .ply", flag_values=fv)
    flags.DEFINE_list("ply_scenes", None, "comma-separated scene keys to export", flag_values=fv)
    flags.DEFINE_integer("ply_count", 1, "export the first K scenes", flag_values=fv)
    flags.DEFINE_string("compare", None,
                        "a results .json of another run: paired comparison (locojax.metrics.paired)",
                        flag_values=fv)
    cli.define_distributed_flags(fv)


def _run_config(known) -> str | None:
    """Without --config: the run's own config.json."""
    from configs.flags import ConfigError

    workdir = known["workdir"].value
    if not workdir:
        return None
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        raise ConfigError(f"--workdir={workdir}: no config.json (not a training run directory; train or import "
                          "weights into it first, or give --config)")
    return path


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config_default=_run_config)
    if isinstance(args, int):
        return args
    cli.maybe_initialize_distributed(args)
    config = args.config
    if args.compare and not os.path.isfile(args.compare):  # before the evaluation, not after it
        return cli.error(f"--compare={args.compare}: no such file")
    if args.num_scenes is not None:
        config.eval.num_scenes = int(args.num_scenes)

    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.eval_run import evaluate_checkpoint
    from locojax.train.run_dir import ConfigMismatchError

    export = None
    if args.export_ply:
        export = list(args.ply_scenes) if args.ply_scenes else args.ply_count
    with cli.OneLineErrors({(ConfigMismatchError, CorruptCheckpointError, DatasetError, FileNotFoundError,
                             ValueError): 2}) as failed:
        out = evaluate_checkpoint(config, args.workdir, step=args.step, protocol=args.protocol,
                                  export_ply=export)
    if failed.exit_code:
        return failed.exit_code
    if args.compare:
        from locojax.train.compare import print_paired_comparison

        with cli.OneLineErrors({(KeyError, ValueError): 2},
                               message=lambda e: f"--compare={args.compare}: {e}") as failed:
            print_paired_comparison(out["json"], args.compare)
    return failed.exit_code


if __name__ == "__main__":
    sys.exit(main())
