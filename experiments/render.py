"""python -m experiments.render --workdir=DIR [--scene=KEY] [--path=orbit|interpolate] [--frames=N]
                                [--step=N] [--fps=24] [--protocol=NAME] [--no_gif]

Renders a novel-view video of one held-out scene from a checkpoint of the run in DIR (its own
config.json): the model predicts the scene's Gaussians from its context views, which are rendered
along a camera path (orbit: a circle around the mean context camera; interpolate: through the
context cameras, rotations by slerp). Writes RGB | depth side by side as DIR/videos/<scene>_<path>_
step<N>.mp4 and .gif. Default: the first scene of the config's protocol, the latest checkpoint.
"""

from __future__ import annotations

import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "a run directory (config.json + checkpoints/) " + cli.REQUIRED,
                        flag_values=fv)
    flags.DEFINE_string("scene", None, "scene key (default: the protocol's first scene)", flag_values=fv)
    flags.DEFINE_enum("path", "orbit", ["orbit", "interpolate"], "camera path", flag_values=fv)
    flags.DEFINE_integer("frames", 60, "number of frames", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("step", None, "checkpoint step (default: the latest)", flag_values=fv)
    flags.DEFINE_integer("fps", 24, "frames per second", lower_bound=1, flag_values=fv)
    flags.DEFINE_string("protocol", None, "evaluation protocol to take the scene from", flag_values=fv)
    flags.DEFINE_boolean("gif", True, "also write a GIF (--nogif / --no_gif: the mp4 only)", flag_values=fv)
    flags.DEFINE_boolean("no_gif", False, "write the mp4 only", flag_values=fv)


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config="none")
    if isinstance(args, int):
        return args

    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.render_run import render_video

    with cli.OneLineErrors({(CorruptCheckpointError, DatasetError, FileNotFoundError, ValueError): 2}) as failed:
        render_video(args.workdir, scene=args.scene, path=args.path, frames=args.frames, step=args.step,
                     fps=args.fps, protocol=args.protocol, gif=args.gif and not args.no_gif)
    return failed.exit_code


if __name__ == "__main__":
    sys.exit(main())
