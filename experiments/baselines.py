"""Trivial baselines on an evaluation protocol (default: the synthetic test split), to show that a
model cannot score well by copying: "nearest context view" (the context image whose camera centre
is closest to the target's, copied as the prediction) and "mean colour" (every pixel = the mean
colour of the context images). PSNR in dB on [0, 1] images, averaged over target views.

    python -m experiments.baselines --config=NAME [--config.KEY=VALUE ...] [--protocol=...]
    python -m experiments.baselines --workdir=RUN_DIR [--protocol=...]
    python -m experiments.baselines [--protocol=synthetic] [--views=2,6] [--image_size=256] [--data_dir=...]

With --config (the same name and overrides as `experiments.train`) or --workdir (a run's own
config.json) the baselines see exactly the scenes, views and image size that run is evaluated on
(its protocol, eval.num_scenes, data_dir): the numbers to put beside its held-out PSNR. Without
either, a standalone synthetic dataset is built from the remaining flags.
"""

from __future__ import annotations

import json
import sys

import ml_collections
import numpy as np

from experiments import cli


def psnr(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    mse = np.mean((pred.astype(np.float64) - target.astype(np.float64)) ** 2, axis=(-1, -2, -3))
    return -10.0 * np.log10(np.maximum(mse, 1e-10))


def evaluate(config, protocol: str) -> dict:
    from data_pipelines.iterators import make_eval_iterator

    it = make_eval_iterator(config, protocol)
    nearest, mean_colour = [], []
    for batch, keys in it:
        for b, key in enumerate(keys):
            if not key:
                continue
            ctx, tgt = batch.context, batch.target
            valid = tgt.index[b] >= 0
            centres_c = ctx.c2w[b, :, :3, 3]
            for v in np.nonzero(valid)[0]:
                d = np.linalg.norm(centres_c - tgt.c2w[b, v, :3, 3], axis=-1)
                nearest.append(psnr(ctx.images[b, int(np.argmin(d))], tgt.images[b, v]))
                mean = ctx.images[b].mean(axis=(0, 1, 2))
                mean_colour.append(psnr(np.broadcast_to(mean, tgt.images[b, v].shape), tgt.images[b, v]))
    return {"protocol": protocol, "num_context_views": int(batch.context.images.shape[1]),
            "image_shape": list(batch.context.images.shape[2:4]),
            "scenes": it.report["evaluated"], "target_views": len(nearest),
            "psnr_nearest_context_view": round(float(np.mean(nearest)), 2),
            "psnr_mean_colour": round(float(np.mean(mean_colour)), 2)}


def _define_flags(fv) -> None:
    from absl import flags

    flags.DEFINE_string("workdir", None, "a run directory: use its config.json", flag_values=fv)
    flags.DEFINE_string("protocol", None, "default: the config's, else synthetic", flag_values=fv)
    flags.DEFINE_list("views", ["2", "6"], "context view counts (synthetic protocol only)", flag_values=fv)
    flags.DEFINE_integer("image_size", 256, "image side (standalone synthetic data)", lower_bound=8, flag_values=fv)
    flags.DEFINE_string("data_dir", None, "dataset directory (standalone synthetic data)", flag_values=fv)
    flags.DEFINE_integer("num_train", None, "synthetic_num_train_scenes (standalone synthetic data)",
                         flag_values=fv)
    flags.DEFINE_integer("num_test", None, "synthetic_num_test_scenes (standalone synthetic data)", flag_values=fv)


def _run_config(fv):
    """Without --config, a --workdir's own config.json."""
    import os

    workdir = fv["workdir"].value
    return os.path.join(workdir, "config.json") if workdir else None


def main(argv=None) -> int:
    from data_pipelines.errors import DatasetError

    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config="optional", config_default=_run_config)
    if isinstance(args, int):
        return args
    if args.config is not None:
        from locojax.train.run import eval_config, eval_protocol

        with cli.OneLineErrors({(DatasetError, FileNotFoundError, ValueError): 2}) as failed:
            from data_pipelines.config import top_value
            from data_pipelines.datasets import check_dataset

            check_dataset(top_value(args.config, "dataset", "synthetic"))  # the run's (even if the protocol's differs)
            result = evaluate(eval_config(args.config), eval_protocol(args.config, args.protocol))
        if failed.exit_code:
            return failed.exit_code
        print(json.dumps(result))
        return 0
    protocol = args.protocol or "synthetic"
    results = []
    views = [int(v) for v in args.views] if protocol == "synthetic" else [None]
    for v in views:
        data = {"data_dir": args.data_dir, "image_shape": (args.image_size, args.image_size),
                "num_context_views": v, "eval_batch_size": 4}
        if args.num_train is not None:
            data["synthetic_num_train_scenes"] = args.num_train
        if args.num_test is not None:
            data["synthetic_num_test_scenes"] = args.num_test
        data = {k: val for k, val in data.items() if val is not None}
        config = ml_collections.ConfigDict({"dataset": "synthetic", "batch_size": 4, "seed": 0, "data": data})
        results.append(evaluate(config, protocol))
        print(json.dumps(results[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
