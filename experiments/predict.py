"""python -m experiments.predict --workdir=RUN --data_dir=OUT --scene=KEY [--context=i,j,...]
                                 [--dataset=NAME] [--step=N] [--path=interpolate|orbit] [--frames=60]
                                 [--max_held_out=32] [--near=X --far=Y] [--lpips] [--out=DIR]

Predicts the Gaussians of any built scene (your own COLMAP / transforms.json imports, or any other
dataset under OUT) with a trained run, from context views chosen nearest in pose to the middle frame
(or --context), and writes under RUN/predict/<dataset>_<scene>_step<N>/: gaussians.ply (INRIA 3DGS
layout), <path>.mp4 (RGB | depth along the camera path) and metrics.json (PSNR / SSIM [/ LPIPS] on
every held-out frame). The run's own config.json fixes the model, the image size and near / far.
"""

from __future__ import annotations

import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "a run directory (config.json + checkpoints/) " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("data_dir", None, "the data directory holding the built scene " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("scene", None, "scene key " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_list("context", None, "context frame indices (default: nearest in pose to the middle frame)",
                      flag_values=fv)
    flags.DEFINE_string("dataset", None, "dataset to look in (default: every built one under --data_dir)",
                        flag_values=fv)
    flags.DEFINE_integer("step", None, "checkpoint step (default: the latest)", flag_values=fv)
    flags.DEFINE_enum("path", "interpolate", ["interpolate", "orbit"], "camera path of the video", flag_values=fv)
    flags.DEFINE_integer("frames", 60, "video frames", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("fps", 24, "video frames per second", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("max_held_out", 32, "score at most this many held-out frames (evenly spread)",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_float("near", None, "near plane (default: the run's training dataset's)", flag_values=fv)
    flags.DEFINE_float("far", None, "far plane (default: the run's training dataset's)", flag_values=fv)
    flags.DEFINE_boolean("lpips", None, "also score LPIPS (default: as the run's evaluation)", flag_values=fv)
    flags.DEFINE_string("out", None, "output folder (default RUN/predict/<dataset>_<scene>_step<N>)", flag_values=fv)


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config="none")
    if isinstance(args, int):
        return args
    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError
    from locojax.train.predict_scene import predict_scene

    try:
        context = [int(c) for c in args.context] if args.context else None
    except ValueError:
        return cli.error(f"--context={','.join(args.context)}: expected comma-separated frame indices")
    # (str(KeyError) quotes its message: the quotes are dropped)
    with cli.OneLineErrors({(CorruptCheckpointError, DatasetError, FileNotFoundError, ValueError, KeyError): 2},
                           message=lambda e: str(e).strip("'")) as failed:
        predict_scene(args.workdir, args.data_dir, args.scene, context=context, dataset=args.dataset,
                      step=args.step, path=args.path, frames=args.frames, fps=args.fps,
                      max_held_out=args.max_held_out, out_dir=args.out, near=args.near, far=args.far,
                      lpips=args.lpips)
    return failed.exit_code


if __name__ == "__main__":
    sys.exit(main())
