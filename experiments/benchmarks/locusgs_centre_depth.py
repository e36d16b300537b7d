"""Where do a LocusGS run's Gaussians sit in depth? (docs/locusgs_depth.md)

    python -m experiments.benchmarks.locusgs_centre_depth --workdir=RUN [--step=N]
    python -m experiments.benchmarks.locusgs_centre_depth --frames [--config=locusgs_tiny] [--batches=100]

--workdir: for every held-out scene of the run's evaluation (synthetic data, which stores exact depth),
the camera-0 z of the final Gaussians (percentiles, opacity-weighted median), their largest scale and its
footprint fx * scale / z in pixels of view 0, and of the last supervised layer's anchors, the anchor radius, next to the scene's true z-depth in context view 0, in world units
and divided by the context baseline |c_1 - c_0| (the network frame of pose_scale="context").
--frames: the same true-depth statistics over training batches of the preset's sampler, so that one can
see how far one network-frame depth can fit every sample under each pose scale.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _pct(x, q=(5, 50, 95)):
    return np.round(np.percentile(x, q), 2).tolist()


def _weighted_median(x, w):
    o = np.argsort(x)
    cw = np.cumsum(w[o])
    return float(x[o][np.searchsorted(cw, cw[-1] / 2)])


def run_depths(workdir: str, step=None) -> list[dict]:
    """Per held-out scene: true depth vs Gaussian / anchor depth in camera 0 of the checkpoint's prediction."""
    from data_pipelines.iterators import make_eval_iterator
    from data_pipelines.loading import load_scenes
    from locojax.models.registry import build_model
    from locojax.train.render_run import restore_params, run_config

    config = run_config(workdir)
    if config.dataset != "synthetic":
        raise ValueError(f"--workdir={workdir}: dataset {config.dataset!r}; true depth exists for 'synthetic' only")
    model = build_model(config)
    _, params, step = restore_params(config, workdir, step, model)
    scenes = {s.key: s for s in load_scenes("synthetic", "test", config=config)}
    last = config.model.supervised_layers[-1]
    rows = []
    for batch, keys in make_eval_iterator(config, None):
        pred = model.predict(params, batch.context)
        ctx = batch.context
        for b, key in enumerate(keys):
            if not key:
                continue
            c2w = np.asarray(ctx.c2w[b])
            w2c = np.linalg.inv(c2w[0])
            baseline = float(np.linalg.norm(c2w[1, :3, 3] - c2w[0, :3, 3]))
            z_of = lambda p: (p @ w2c[:3, :3].T + w2c[:3, 3])[:, 2]  # noqa: E731
            true_z = scenes[key].depth[int(ctx.index[b, 0])].ravel()
            z = z_of(np.asarray(pred.gaussians.means[b]))
            opacity = np.asarray(pred.gaussians.opacities[b])
            scale = np.asarray(pred.gaussians.scales[b]).max(-1)
            fx_px = float(ctx.intrinsics[b, 0, 0, 0]) * ctx.images.shape[3]
            row = dict(scene=key, step=step, baseline=round(baseline, 3), true_z=_pct(true_z), gauss_z=_pct(z),
                       gauss_z_opacity_median=round(_weighted_median(z, opacity), 2),
                       gauss_z_net=_pct(z / baseline), true_z_net=_pct(true_z / baseline),
                       scale_median=round(float(np.median(scale)), 3),
                       footprint_px_median=round(float(np.median(fx_px * scale / np.maximum(z, 1e-6))), 2))
            if f"anchors_{last}" in pred.aux:
                row["anchor_z"] = _pct(z_of(np.asarray(pred.aux[f"anchors_{last}"][b])))
                row["anchor_radius_median"] = round(float(np.median(pred.aux[f"anchor_radii_{last}"][b])), 3)
            rows.append(row)
    return rows


def frame_depths(config_name: str, batches: int) -> dict:
    """True median context-0 depth of training samples, in world units and over the context baseline."""
    from configs import get_config
    from data_pipelines.iterators import make_train_iterator

    config = get_config(config_name)
    config.data.load_depth = True
    it = iter(make_train_iterator(config))
    world, baseline = [], []
    for _ in range(batches):
        ctx = next(it).context
        for b in range(ctx.c2w.shape[0]):
            c2w = np.asarray(ctx.c2w[b])
            baseline.append(float(np.linalg.norm(c2w[1, :3, 3] - c2w[0, :3, 3])))
            world.append(float(np.median(np.asarray(ctx.depth[b, 0]))))
    world, baseline = np.asarray(world), np.asarray(baseline)
    return dict(samples=len(world), baseline=_pct(baseline), median_z_world=_pct(world),
                median_z_over_baseline=_pct(world / baseline))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.benchmarks.locusgs_centre_depth", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir")
    ap.add_argument("--step", type=int, default=None)
    ap.add_argument("--frames", action="store_true")
    ap.add_argument("--config", default="locusgs_tiny")
    ap.add_argument("--batches", type=int, default=100)
    args = ap.parse_args(argv)
    if not args.workdir and not args.frames:
        ap.error("give --workdir=RUN and/or --frames")
    if args.frames:
        print("training samples:", frame_depths(args.config, args.batches))
    if args.workdir:
        rows = run_depths(args.workdir, args.step)
        for r in rows:
            print(r)
        mean = lambda k: np.mean([r[k][1] for r in rows])  # noqa: E731
        print(f"mean over scenes of the medians: true z {mean('true_z'):.2f}, Gaussians {mean('gauss_z'):.2f}"
              + (f", anchors {mean('anchor_z'):.2f}" if "anchor_z" in rows[0] else "")
              + f"; over baseline: true {mean('true_z_net'):.2f}, Gaussians {mean('gauss_z_net'):.2f}; footprint "
              f"{np.mean([r['footprint_px_median'] for r in rows]):.2f} px, scale {np.mean([r['scale_median'] for r in rows]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
