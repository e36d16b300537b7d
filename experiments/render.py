"""python -m experiments.render --workdir=DIR [--scene=KEY] [--path=orbit|interpolate] [--frames=N]
                                [--step=N] [--fps=24] [--protocol=NAME] [--no_gif]

Renders a novel-view video of one held-out scene from a checkpoint of the run in DIR (its own
config.json): the model predicts the scene's Gaussians from its context views, which are rendered
along a camera path (orbit: a circle around the mean context camera; interpolate: through the
context cameras, rotations by slerp). Writes RGB | depth side by side as DIR/videos/<scene>_<path>_
step<N>.mp4 and .gif. Default: the first scene of the config's protocol, the latest checkpoint.
"""

from __future__ import annotations

import argparse
import sys

from experiments import cli


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m experiments.render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True, help="a run directory (config.json + checkpoints/)")
    parser.add_argument("--scene", default=None, help="scene key (default: the protocol's first scene)")
    parser.add_argument("--path", default="orbit", choices=("orbit", "interpolate"))
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--step", type=int, default=None, help="checkpoint step (default: the latest)")
    parser.add_argument("--fps", type=int, default=24)
    parser.add_argument("--protocol", default=None, help="evaluation protocol to take the scene from")
    parser.add_argument("--no_gif", action="store_true", help="write the mp4 only")
    args = parser.parse_args(argv)

    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.render_run import render_video

    try:
        render_video(args.workdir, scene=args.scene, path=args.path, frames=args.frames, step=args.step,
                     fps=args.fps, protocol=args.protocol, gif=not args.no_gif)
    except (CorruptCheckpointError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
