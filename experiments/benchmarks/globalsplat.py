"""GlobalSplat efficiency benchmark (paper Table 3; A100 anchors: 77.88 ms, 1.79 GB, 16K Gaussians,
3.8 MB at 24 input views).

    python -m experiments.benchmark globalsplat --config=globalsplat_16k [--views=24] [--targets=12]
        [--resolution=256] [--repeats=3] [--dtype=float32|bfloat16] [--remat] [--attention=xla|cudnn]
        [--out=FILE.json]

Reports: encoder time (images -> Gaussians, jitted, first call excluded), render time of the target
views (locojax.render.rasterize_batch), peak memory (device `memory_stats()` where available, else
the process' peak RSS), Gaussian count, size on disk (float32 .npz and PLY of the scene), and the
encoder's achieved FLOP/s (XLA cost analysis of the compiled encoder / measured time) next to a
plain float32 matmul's FLOP/s on the same device.
"""

from __future__ import annotations

import argparse
import io
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks.process_memory import peak_rss_bytes
from experiments.benchmarks.timing import matmul_gflops_per_s, timed


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m experiments.benchmark globalsplat", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="globalsplat_16k", help="a globalsplat config name (default %(default)s)")
    ap.add_argument("--views", type=int, default=24, help="input (context) views (default %(default)s)")
    ap.add_argument("--targets", type=int, default=12, help="rendered target views (default %(default)s)")
    ap.add_argument("--resolution", type=int, default=256, help="square image size (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls after the first (default %(default)s)")
    ap.add_argument("--dtype", default=None, choices=["float32", "bfloat16"],
                    help="config.precision (default: the config's)")
    ap.add_argument("--remat", action="store_true", help="config.model.remat = True")
    ap.add_argument("--attention", default=None, choices=["xla", "cudnn"],
                    help="config.model.attention_impl (cudnn: GPU flash attention, use with bfloat16)")
    ap.add_argument("--matmul", type=int, default=2048, help="size of the reference square matmul")
    ap.add_argument("--out", default=None, help="also write the report as JSON here")
    return ap.parse_args(argv)


def _flops(jitted, *args) -> float:
    try:
        cost = jitted.lower(*args).compile().cost_analysis()
        if isinstance(cost, (list, tuple)):
            cost = cost[0]
        return float(cost.get("flops", float("nan")))
    except Exception:  # noqa: BLE001 - cost analysis is best effort on some backends
        return float("nan")


def _peak_memory_bytes() -> tuple[float, str]:
    dev = jax.devices()[0]
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        return float(stats["peak_bytes_in_use"]), "device peak_bytes_in_use"
    return float(peak_rss_bytes()), "process peak RSS (CPU)"


def _disk_sizes(g) -> dict:
    arrays = {k: np.asarray(getattr(g, k)[0], np.float32) for k in ("means", "quats", "scales", "opacities", "sh")}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    npz = buf.getbuffer().nbytes
    n = arrays["means"].shape[0]
    floats_per = 3 + 4 + 3 + 1 + arrays["sh"][0].size  # 3DGS PLY: xyz, rot, scale, opacity, SH
    ply = n * (floats_per + 3) * 4 + 400  # + nx, ny, nz and a header, as 3DGS writes it
    return {"npz_bytes": int(npz), "ply_bytes_estimate": int(ply)}


def main(argv=None) -> int:
    """CLI entry point (`experiments.benchmark` passes the remaining argv); prints the JSON report."""
    import configs

    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        configs.get_config(args.config)
    except ValueError as e:
        print(f"error: --config={args.config}: {e}", file=sys.stderr)
        return 2
    run(args)
    return 0


def run(args) -> dict:
    """The benchmark for parsed `args`; returns the report dict."""
    import configs
    from locojax.models.globalsplat import build
    from locojax.geometry.cameras import cameras_from_views
    from locojax.geometry.scene_normalization import globalsplat_normalize
    from locojax.render import rasterize_batch
    from locojax.types import Views

    config = configs.get_config(args.config)
    if args.dtype:
        config.precision = args.dtype  # every part (config.model.precision.* follow it)
    if args.remat:
        config.model.remat = True
    if args.attention:
        config.model.attention_impl = args.attention
    model = build(config)
    n_params = None

    v, t, r = args.views, args.targets, args.resolution
    rng = np.random.default_rng(0)
    angles = np.linspace(-0.5, 0.5, v + t)
    c2w = np.tile(np.eye(4, dtype=np.float32), (v + t, 1, 1))
    c2w[:, 0, 3] = np.sin(angles) * 2.0
    c2w[:, 2, 3] = 1.0 - np.cos(angles) * 2.0
    c2w = globalsplat_normalize(c2w).c2w
    K = np.tile(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (1, v + t, 1, 1))
    views = Views(images=rng.uniform(0, 1, (1, v + t, r, r, 3)).astype(np.float32), intrinsics=K,
                  c2w=c2w[None], near=np.full((1, v + t), 0.1, np.float32),
                  far=np.full((1, v + t), 100.0, np.float32), index=np.arange(v + t, dtype=np.int32)[None])
    views = jax.tree_util.tree_map(jnp.asarray, views)
    context = jax.tree_util.tree_map(lambda x: x[:, :v], views)
    target = jax.tree_util.tree_map(lambda x: x[:, v:], views)

    params = jax.jit(model.net.init)(jax.random.PRNGKey(0), context.images[:, :2], context.c2w[:, :2],
                                     context.intrinsics[:, :2])["params"]
    n_params = int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
    print(f"{args.config}: {n_params:,} parameters, {model.num_gaussians:,} Gaussians", flush=True)

    encode = jax.jit(lambda p, c: model.predict(p, c, step=jnp.int32(0), train=False).gaussians)
    gaussians, enc_s, _ = timed(encode, params, context, repeats=args.repeats)
    enc_flops = _flops(encode, params, context)

    cams = cameras_from_views(target)
    render = jax.jit(lambda g, c: rasterize_batch(g, c, width=r, height=r, sh_degree=int(config.model.sh_degree),
                                                  eps2d=float(config.render.get("eps2d", 0.3))).rgb)
    _, render_s, _ = timed(render, gaussians, cams, repeats=args.repeats)

    matmul = matmul_gflops_per_s(args.matmul, repeats=max(args.repeats, 3))

    peak, peak_kind = _peak_memory_bytes()
    result = {
        "config": args.config, "device": str(jax.devices()[0].device_kind), "backend": jax.default_backend(),
        "dtype": str(config.precision), "remat": bool(config.model.remat),
        "views": v, "targets": t, "resolution": r, "parameters": n_params,
        "num_gaussians": int(gaussians.means.shape[1]),
        "encoder_ms": enc_s * 1e3, "render_ms_all_targets": render_s * 1e3,
        "render_ms_per_view": render_s * 1e3 / t,
        "peak_memory_gb": peak / 1e9, "peak_memory_kind": peak_kind,
        **{k: v_ for k, v_ in _disk_sizes(gaussians).items()},
        "encoder_gflop": enc_flops / 1e9, "encoder_gflops_per_s": enc_flops / enc_s / 1e9,
        "matmul_gflops_per_s": matmul,
        "paper_a100": {"encoder_ms": 77.88, "peak_memory_gb": 1.79, "num_gaussians": 16384, "disk_mb": 3.8},
    }
    result["encoder_fraction_of_matmul"] = result["encoder_gflops_per_s"] / result["matmul_gflops_per_s"]
    print(json.dumps(result, indent=2), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
