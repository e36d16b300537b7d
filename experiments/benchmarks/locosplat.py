"""LoCoSplat efficiency benchmark, the paper's A.1 protocol (Tables 6-7: batch 1, 256x256 inputs, 8
target views, warm-up excluded, per-scene medians of synchronised wall-clock time, peak memory).

    python -m experiments.benchmark locosplat [--views=6,12,24] [--precision=float32|float16|bfloat16]
        [--scenes=2] [--repeats=3] [--resolution=256] [--targets=8] [--config=NAME] [--out=FILE.json]

For each context-view count V: the preset `locosplat_{V}v` (else `locosplat_6v` with V views, or
--config) at its real widths with RANDOMLY INITIALISED weights (the frozen DepthAnythingV2 trunk is
made trainable so no converted weights are needed; timing, FLOPs and memory depend on shapes only,
not on weight values), on SYNTHETIC inputs (uniform-noise images, a sideways camera rig with the
targets between the context views). Reports:
  encoder ms   the jitted `predict` (depth branch + regressor + anchors + 3D stage + head + decoding)
  render ms    rasterising all targets from the encoder's Gaussians (the trainer's renderer)
  memory       XLA's compiled memory analysis (arguments + outputs + temporaries) of the encoder and
               of the render (the render's arguments include the Gaussians; the "peak" figure is
               max(encoder, parameters + render)), and the process' peak RSS (compiles included)
  Gaussians    live anchors (median over scenes; random weights give arbitrary depth, so this is
               not the trained model's figure) and the static capacity V*H*W rows
  GFLOP        encoder FLOPs (locojax.train.flops: XLA cost analysis with scan trip counts) and
               the achieved GFLOP/s, next to a float32 matmul's GFLOP/s on the same device
Each scene: the first (compile) call excluded, then the median of --repeats calls; the figure is the
median over --scenes scenes. Printed next to the paper's (Tables 6/7, RTX PRO 6000, deployed fp16
path: encoder 33.0 / 62.9 / 137.4 ms, fp32 eager 56.9 ms at 6v; render 9.1 / 14.8 / 26.5 ms; peak
1,081 / 1,695 / 2,925 MB). --precision sets model.depth.image_dtype: the paper's half-precision
image side (trunk, CNN, multi-view transformer) with float32 warping, depth and 3D stage (B.1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from experiments.benchmarks.process_memory import peak_rss_bytes

# Paper 000, Tables 6 and 7 (A.1 protocol, deployed fp16 path; fp32 eager only stated at 6 views).
PAPER = {6: {"encoder_ms": 33.0, "encoder_fp32_ms": 56.9, "render_ms": 9.1, "peak_mb": 1081, "gaussians": 393_216},
         12: {"encoder_ms": 62.9, "render_ms": 14.8, "peak_mb": 1695, "gaussians": 786_432},
         24: {"encoder_ms": 137.4, "render_ms": 26.5, "peak_mb": 2925, "gaussians": 1_572_864}}


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m experiments.benchmark locosplat", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--views", default="6,12,24", help="context-view counts, comma-separated (default %(default)s)")
    ap.add_argument("--precision", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="model.depth.image_dtype: the image side's compute dtype (default %(default)s)")
    ap.add_argument("--config", default=None, help="a locosplat config (default: locosplat_{V}v per view count)")
    ap.add_argument("--scenes", type=int, default=2, help="synthetic scenes (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per scene after warm-up (default %(default)s)")
    ap.add_argument("--resolution", type=int, default=256, help="square image size (default %(default)s)")
    ap.add_argument("--targets", type=int, default=8, help="rendered target views (default %(default)s)")
    ap.add_argument("--matmul", type=int, default=2048, help="size of the reference float32 square matmul")
    ap.add_argument("--out", default=None, help="also write the report as JSON here")
    return ap.parse_args(argv)


def _config(name, views, args):
    import configs

    config = configs.get_config(name)
    config.data.num_context_views = views
    config.data.num_target_views = args.targets
    config.data.image_shape = (args.resolution, args.resolution)
    config.model.depth.image_dtype = args.precision
    # Random weights: a frozen pretrained-width trunk refuses to initialise without converted weights.
    random_trunk = not config.model.depth.trunk_trainable
    config.model.depth.trunk_trainable = True
    config.optimizer.frozen_groups = tuple(g for g in config.optimizer.frozen_groups if g != "backbone")
    return config, random_trunk


def synthetic_views(seed: int, views: int, targets: int, size: int, near: float, far: float):
    """One scene, batch 1: uniform-noise images [1, V+T, S, S, 3], a sideways rig 1 unit wide with the
    targets evenly between the context cameras, looking down +z (OpenCV), normalised intrinsics."""
    from locojax.types import Views
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    n = views + targets
    xs = np.concatenate([np.linspace(0.0, 1.0, views), np.linspace(0.05, 0.95, targets)])
    c2w = np.tile(np.eye(4, dtype=np.float32), (1, n, 1, 1))
    c2w[0, :, 0, 3] = xs
    c2w[0, :, 2, 3] = rng.uniform(-0.05, 0.05, n)
    K = np.tile(np.array([[0.9, 0, 0.5], [0, 0.9, 0.5], [0, 0, 1]], np.float32), (1, n, 1, 1))
    v = Views(images=jnp.asarray(rng.uniform(0, 1, (1, n, size, size, 3)), jnp.float32), intrinsics=jnp.asarray(K),
              c2w=jnp.asarray(c2w), near=jnp.full((1, n), near, jnp.float32), far=jnp.full((1, n), far, jnp.float32),
              index=jnp.arange(n, dtype=jnp.int32)[None])
    import jax

    return (jax.tree_util.tree_map(lambda x: x[:, :views], v), jax.tree_util.tree_map(lambda x: x[:, views:], v))


def _timed(fn, *args, repeats: int):
    """(output, median seconds of `repeats` calls) after one untimed warm-up call."""
    import jax

    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def _xla_bytes(compiled) -> int | None:
    mem = compiled.memory_analysis()
    if mem is None:
        return None
    return int(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
               - getattr(mem, "alias_size_in_bytes", 0))


def bench_views(views: int, args) -> dict:
    import jax

    from locojax.models.locosplat import build
    from locojax.render.factory import make_render_fn
    from locojax.train.flops import count_flops

    name = args.config or (f"locosplat_{views}v" if views in PAPER else "locosplat_6v")
    config, random_trunk = _config(name, views, args)
    model = build(config)
    near, far = float(config.data.near), float(config.data.far)
    ctx, tgt = synthetic_views(0, views, args.targets, args.resolution, near, far)
    c = ctx
    params = jax.jit(lambda k: {"net": model.net.init(k, c.images, c.intrinsics, c.c2w, c.near, c.far,
                                                      train=False)["params"]})(jax.random.PRNGKey(0))
    n_params = int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
    param_bytes = int(sum(x.nbytes for x in jax.tree_util.tree_leaves(params)))

    def encode(p, context):
        pred = model.predict(p, context, train=False)
        return pred.gaussians, pred.aux["num_active_gaussians"]

    render_fn = make_render_fn(config.render, model.sh_degree)

    def render(g, target):
        return render_fn(g, target).rgb

    t0 = time.perf_counter()
    enc = jax.jit(encode).lower(params, ctx).compile()
    enc_compile = time.perf_counter() - t0
    flops = count_flops(encode, params, ctx)
    print(f"{name} x{views} views {args.resolution}px {args.precision}: {n_params:,} parameters "
          f"({'random weights, trunk made trainable' if random_trunk else 'random weights'}), capacity "
          f"{model.num_gaussians:,} Gaussians, {flops.flops / 1e9:.1f} GFLOP, encoder compile {enc_compile:.0f} s",
          flush=True)
    g0, _ = enc(params, ctx)
    t0 = time.perf_counter()
    ren = jax.jit(render).lower(g0, tgt).compile()
    ren_compile = time.perf_counter() - t0

    enc_ms, ren_ms, live = [], [], []
    for scene in range(args.scenes):
        ctx, tgt = synthetic_views(scene, views, args.targets, args.resolution, near, far)
        (g, num), sec = _timed(enc, params, ctx, repeats=args.repeats)
        _, rsec = _timed(ren, g, tgt, repeats=args.repeats)
        enc_ms.append(sec * 1e3)
        ren_ms.append(rsec * 1e3)
        live.append(int(np.asarray(num)[0]))
        print(f"  scene {scene}: encoder {sec * 1e3:.0f} ms, render {rsec * 1e3:.0f} ms, {live[-1]:,} live anchors, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    enc_b, ren_b = _xla_bytes(enc), _xla_bytes(ren)
    enc_med = float(np.median(enc_ms))
    return {
        "config": name, "views": views, "targets": args.targets, "resolution": args.resolution, "batch": 1,
        "precision": args.precision, "random_weights": True, "synthetic_inputs": True,
        "parameters": n_params, "capacity": int(model.num_gaussians), "live_anchors": int(np.median(live)),
        "encoder_ms": enc_med, "render_ms": float(np.median(ren_ms)),
        "encoder_ms_per_scene": enc_ms, "render_ms_per_scene": ren_ms,
        "encoder_compile_s": enc_compile, "render_compile_s": ren_compile,
        "encoder_gflop": flops.flops / 1e9, "encoder_gflop_xla_uncorrected": flops.xla_flops / 1e9,
        "encoder_gflops_per_s": flops.flops / 1e9 / (enc_med / 1e3),
        "xla_encoder_mb": None if enc_b is None else enc_b / 1e6,
        "xla_render_mb": None if ren_b is None else ren_b / 1e6,
        "xla_peak_mb": None if enc_b is None or ren_b is None else max(enc_b, param_bytes + ren_b) / 1e6,
        "process_peak_rss_mb": peak_rss_bytes() / 1e6, "paper": PAPER.get(views),
    }


def _table(report) -> str:
    rows = [f"LoCoSplat A.1 benchmark: {report['device']} ({report['backend']}), load {report['load_start']:.1f} -> "
            f"{report['load_end']:.1f}, float32 matmul {report['matmul_gflops_per_s']:.0f} GFLOP/s; random weights, "
            "synthetic 1 scene = batch 1",
            f"{'V':>3} {'prec':>8} {'enc ms':>9} {'paper':>12} {'render ms':>9} {'paper':>6} {'XLA MB':>7} "
            f"{'RSS MB':>7} {'paper':>6} {'live/capacity':>19} {'GFLOP':>7} {'GFLOP/s':>8}"]
    for r in report["results"]:
        p = r["paper"] or {}
        pe = (f"{p['encoder_ms']:.1f}" + (f"/{p['encoder_fp32_ms']:.1f}" if "encoder_fp32_ms" in p else "")) if p else "-"
        rows.append(f"{r['views']:>3} {r['precision']:>8} {r['encoder_ms']:>9.0f} {pe:>12} {r['render_ms']:>9.0f} "
                    f"{p.get('render_ms', float('nan')):>6.1f} {r['xla_peak_mb'] or float('nan'):>7.0f} "
                    f"{r['process_peak_rss_mb']:>7.0f} {p.get('peak_mb', float('nan')):>6.0f} "
                    f"{r['live_anchors']:>9,}/{r['capacity']:<9,} {r['encoder_gflop']:>7.1f} "
                    f"{r['encoder_gflops_per_s']:>8.1f}")
    rows.append("paper: RTX PRO 6000, fp16 deployed / fp32 eager encoder ms; XLA MB = max(encoder, params + render) "
                "compiled memory analysis; RSS = process peak so far (compiles included)")
    return "\n".join(rows)


def run(args) -> dict:
    import jax
    import jax.numpy as jnp

    load0 = os.getloadavg()[0]
    a = jnp.asarray(np.random.default_rng(0).normal(size=(args.matmul, args.matmul)), jnp.float32)
    _, mm_s = _timed(jax.jit(lambda x: x @ x), a, repeats=3)
    results = [bench_views(int(v), args) for v in str(args.views).split(",")]
    report = {"device": str(jax.devices()[0].device_kind), "backend": jax.default_backend(),
              "matmul_gflops_per_s": 2.0 * args.matmul ** 3 / mm_s / 1e9, "load_start": load0,
              "load_end": os.getloadavg()[0], "results": results}
    print(json.dumps(report, indent=1), flush=True)
    print(_table(report), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return report


def main(argv=None) -> int:
    """CLI entry point (`experiments.benchmark` passes the remaining argv)."""
    import configs

    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.config is not None:
        try:
            configs.get_config(args.config)
        except ValueError as e:
            print(f"error: --config={args.config}: {e}", file=sys.stderr)
            return 2
    import jax

    if args.precision == "float16" and jax.default_backend() == "cpu":
        print("error: --precision=float16: XLA's CPU backend rejects float16 matmuls with float32 results "
              "('F16_F16_F32'); use --precision=bfloat16 on CPU (float16 is the GPU deployment)", file=sys.stderr)
        return 2
    run(args)
    return 0


if __name__ == "__main__":
    main()
