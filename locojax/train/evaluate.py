"""Held-out evaluation: protocols by name -> per-scene PSNR / SSIM / LPIPS, Gaussian count and
encoder time, the family's own diagnostics, sample renders, and optionally each scene's Gaussians
(for .ply export).

Family diagnostics: every entry `aux["diag/<name>"]` of shape [B] that a model's `predict` returns
with train=False (e.g. LoCoSplat's Table 13 matching statistics, LocusGS's C_centroid dispersion) is
recorded per scene as column `diag/<name>` and averaged in the summary.

The eval iterator's last batch is padded (scene_id == -1); padded rows are dropped. Functions are
jitted once per Evaluator, so evaluations during training never recompile.
"""

from __future__ import annotations

import csv
import math
import json
import os
import time
from typing import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from locojax import metrics
from locojax.train import sharding as shd
from locojax.train.step import cast_floats

RESULT_FIELDS = ("scene", "psnr", "ssim", "lpips", "num_gaussians", "encoder_ms")
DIAG_PREFIX = "diag/"


def _lpips_fn():
    """A jitted LPIPS taking its VGG weights as an argument (not a 58 MB captured constant)."""
    from locojax.metrics import lpips_with_params

    def fn(params, pred, target):
        lead = pred.shape[:-3]
        flat = lambda x: x.reshape((-1,) + x.shape[-3:])  # noqa: E731
        return lpips_with_params(params, flat(pred), flat(target)).reshape(lead)

    return jax.jit(fn)


class Evaluator:
    """Jitted predict and render+metrics functions for one model / mesh."""

    def __init__(self, model, render: Callable, config, mesh, param_shardings):
        self.model, self.config, self.mesh = model, config, mesh
        self._psnr, self._ssim = metrics.psnr, metrics.ssim
        self.use_lpips = bool(config.eval.lpips)
        if self.use_lpips:
            self._lpips = _lpips_fn()
        rep = shd.replicated(mesh)
        bsh = shd.batch_sharding(mesh)

        def predict(params, context, step):
            pred = model.predict(params, context, step=step, train=False, rng=jax.random.PRNGKey(0))
            gaussians = cast_floats(pred.gaussians, jnp.float32)
            n_active = pred.aux.get("num_active_gaussians")
            if n_active is None:
                n_active = jnp.full(gaussians.means.shape[:1], gaussians.means.shape[-2], jnp.int32)
            diags = {k: jnp.asarray(v, jnp.float32) for k, v in pred.aux.items() if k.startswith(DIAG_PREFIX)}
            return gaussians, n_active, diags

        def render_metrics(gaussians, target):
            renders = render(gaussians, target)
            rgb = jnp.clip(renders.rgb.astype(jnp.float32), 0.0, 1.0)
            return rgb, renders.depth, self._psnr(rgb, target.images), self._ssim(rgb, target.images)

        self._predict = jax.jit(predict, in_shardings=(param_shardings, bsh, rep), out_shardings=rep)
        self._render_metrics = jax.jit(render_metrics, out_shardings=rep)
        self._warm = False

    @staticmethod
    def _lpips_params():
        # Loaded at the first evaluation, not at construction: a resumed run trains before it evaluates.
        from locojax.metrics import lpips_vgg_params

        return lpips_vgg_params()

    def run(self, params, step, batches: Iterable, *, process_count: int = 1,
            num_samples: int = 0, export_scenes: Iterable[str] | None = None):
        """Evaluate `params` on `batches` (an eval iterator of (Batch, keys)).

        Returns (per-scene result dicts, samples [(key, context, pred, target, depth)],
        exported {key: Gaussians (numpy)}).
        """
        export = set(export_scenes or ())
        results, samples, exported = [], [], {}
        step = jnp.asarray(step, jnp.int32)
        for local_batch, local_keys in batches:
            keys = _gather_keys(list(local_keys), process_count)
            batch = shd.global_batch(local_batch, self.mesh)
            if not self._warm:  # compile outside the timed call
                jax.block_until_ready(self._predict(params, batch.context, step))
                self._warm = True
            t0 = time.perf_counter()
            gaussians, n_active, diags = jax.block_until_ready(self._predict(params, batch.context, step))
            encoder_ms = (time.perf_counter() - t0) * 1e3 / max(len(keys), 1)
            rgb, depth, psnr, ssim = self._render_metrics(gaussians, batch.target)
            target = np.asarray(_fetch(batch.target.images))
            lp = (np.asarray(self._lpips(self._lpips_params(), rgb, jnp.asarray(target))) if self.use_lpips
                  else np.full(psnr.shape, np.nan, np.float32))
            scene_id = np.asarray(_fetch(batch.scene_id))
            # Protocols with fewer targets for some scenes pad the view axis with index -1.
            valid_view = np.asarray(_fetch(batch.target.index)) >= 0  # [B, V]
            psnr, ssim, n_active = np.asarray(psnr), np.asarray(ssim), np.asarray(n_active)
            diags = {k: np.asarray(v) for k, v in diags.items()}
            for i, key in enumerate(keys):
                if i >= scene_id.shape[0] or scene_id[i] < 0:
                    continue  # padded scene
                v = valid_view[i]
                results.append(dict(scene=key, psnr=float(psnr[i][v].mean()), ssim=float(ssim[i][v].mean()),
                                    lpips=float(lp[i][v].mean()), num_gaussians=int(n_active[i]),
                                    encoder_ms=float(encoder_ms),
                                    **{k: float(d[i]) for k, d in diags.items()}))
                if len(samples) < num_samples:
                    samples.append((key, np.asarray(_fetch(batch.context.images))[i], np.asarray(rgb)[i][v],
                                    target[i][v], np.asarray(depth)[i][v]))
                if key in export:
                    exported[key] = jax.tree_util.tree_map(lambda x: np.asarray(x)[i], gaussians)
        return results, samples, exported


def _fetch(x):
    """A global (possibly multi-process) array -> numpy on every process."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _gather_keys(local_keys: list[str], process_count: int) -> list[str]:
    """Scene keys of the global batch, process 0's rows first (as make_array_from_process_local_data
    orders them)."""
    return [k for part in shd.allgather_json(local_keys, process_count) for k in part]


def _diag_keys(results: list[dict]) -> list[str]:
    return sorted({k for r in results for k in r if k.startswith(DIAG_PREFIX)})


def summarize(results: list[dict]) -> dict:
    out = {"num_scenes": len(results)}
    for k in ("psnr", "ssim", "lpips", "num_gaussians", "encoder_ms", *_diag_keys(results)):
        vals = np.array([r[k] for r in results], np.float64)
        out[k] = float(np.mean(vals)) if len(vals) else float("nan")
    return out


def write_results(results: list[dict], path_stem: str) -> tuple[str, str]:
    """Per-scene results as `<stem>.csv` and `<stem>.json`; returns both paths."""
    os.makedirs(os.path.dirname(path_stem) or ".", exist_ok=True)
    csv_path, json_path = path_stem + ".csv", path_stem + ".json"
    with open(csv_path, "w", newline="") as f:
        fields = RESULT_FIELDS + tuple(_diag_keys(results))
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in results:
            w.writerow({k: r.get(k, "") for k in fields})
    with open(json_path, "w") as f:
        json.dump({"scenes": results, "summary": summarize(results)}, f, indent=1)
    return csv_path, json_path


def format_lpips(value: float, width: int = 7) -> str:
    """LPIPS as printed: "off" when it was not computed (config.eval.lpips=false leaves it NaN)."""
    return f"{'off':>{width}s}" if math.isnan(value) else f"{value:{width}.4f}"


def format_table(results: list[dict], title: str = "") -> str:
    s = summarize(results)
    lines = [title] if title else []
    lines.append(f"{'scene':<28s} {'PSNR':>7s} {'SSIM':>7s} {'LPIPS':>7s} {'#G':>8s} {'enc ms':>8s}")
    for r in results:
        lines.append(f"{r['scene'][:28]:<28s} {r['psnr']:7.2f} {r['ssim']:7.4f} {format_lpips(r['lpips'])} "
                     f"{r['num_gaussians']:8d} {r['encoder_ms']:8.1f}")
    lines.append(f"{'mean (' + str(s['num_scenes']) + ' scenes)':<28s} {s['psnr']:7.2f} {s['ssim']:7.4f} "
                 f"{format_lpips(s['lpips'])} {s['num_gaussians']:8.0f} {s['encoder_ms']:8.1f}")
    return "\n".join(lines)
