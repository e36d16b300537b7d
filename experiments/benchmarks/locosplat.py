"""LoCoSplat efficiency benchmark, the paper's A.1 protocol (Tables 6-7: batch 1, 256x256 inputs, 8
target views, warm-up excluded, per-scene medians of synchronised wall-clock time, peak memory).

    python -m experiments.benchmark locosplat [--views=6,12,24] [--precision=float32|float16|bfloat16]
        [--scenes=2] [--repeats=3] [--resolution=256] [--targets=8] [--config=NAME] [--out=FILE.json]
        [--params_cache=FILE.npz]

For each context-view count V: the preset `locosplat_{V}v` (else `locosplat_6v` with V views, or
--config) at its real widths with RANDOMLY INITIALISED weights (the frozen DepthAnythingV2 trunk is
made trainable so no converted weights are needed; timing, FLOPs and memory depend on shapes only,
not on weight values; live anchors and the render's tile work do). The weights come from each
layer's own initialiser through Flax's lazy_init (no forward pass, RBG bit generator, key 0: seconds
to a minute instead of the 9+ minutes a jitted init took to compile) and can be cached in an .npz
reused by every view count (the shapes do not depend on V or the resolution). The encoder is traced
and lowered once: the FLOP count reads that lowering (no compile), the one compile is timed. Inputs
are SYNTHETIC (uniform-noise images, a sideways camera rig with the
targets between the context views). Reports (also trace + compile seconds and the load average per scene):
  encoder ms   the jitted `predict` (depth branch + regressor + anchors + 3D stage + head + decoding)
  render ms    rasterising all targets from the encoder's Gaussians (the trainer's renderer)
  memory       XLA's compiled memory analysis (arguments + outputs + temporaries) of the encoder and
               of the render (the render's arguments include the Gaussians; the "peak" figure is
               max(encoder, parameters + render)), and the process' peak RSS (compiles included)
  Gaussians    live anchors (median over scenes; random weights give arbitrary depth, so this is
               not the trained model's figure) and the static capacity V*H*W rows
  GFLOP        encoder FLOPs (locojax.train.flops: XLA cost analysis with scan trip counts) and
               the achieved GFLOP/s, next to a float32 matmul's GFLOP/s on the same device
One untimed warm-up call after compiling (scene 0), then per scene the median of --repeats calls;
the figure is the median over --scenes scenes. Printed next to the paper's (Tables 6/7, RTX PRO 6000, deployed fp16
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
from experiments.benchmarks.timing import matmul_gflops_per_s, timed

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
    ap.add_argument("--params_cache", default=None,
                    help="an .npz holding the random parameters: made once, reused by later runs (any view count)")
    ap.add_argument("--out", default=None,
                    help="also write the report as JSON here (merged into an existing report: one entry per "
                         "view count and precision)")
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


def _xla_bytes(compiled) -> int | None:
    mem = compiled.memory_analysis()
    if mem is None:
        return None
    return int(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
               - getattr(mem, "alias_size_in_bytes", 0))


def random_params(model, context, cache: str | None):
    """Random parameters {"net": ...} of `model` and a record of how they were made.

    Flax's `lazy_init` runs every layer's own initialiser without the forward pass (the inputs are
    only shapes); the bit generator is XLA's RngBitGenerator ("unsafe_rbg"): compiling threefry for
    99M values took 5 min on the 2-core CPU, RBG 1 min, and a jitted `init` (forward included) 9+ min.
    The parameter shapes do not depend on the view count or resolution, so with `cache` (an .npz) the
    arrays are made once and reused by every view count; a cache whose names or shapes differ is
    rebuilt. Live-anchor counts depend on these weights (random weights give arbitrary depth)."""
    import jax
    import jax.numpy as jnp

    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in
              (context.images, context.intrinsics, context.c2w, context.near, context.far)]
    prev = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", "unsafe_rbg")
    try:
        t0 = time.perf_counter()
        traced = jax.jit(lambda k: {"net": model.net.lazy_init(k, *shapes, train=False)["params"]}).trace(
            jax.random.PRNGKey(0))
        info = traced.out_info
        names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(info)[0]]
        want = {n: (tuple(x.shape), str(x.dtype)) for n, x in zip(names, jax.tree_util.tree_leaves(info))}
        how = "random weights (Flax initialisers via lazy_init, unsafe_rbg key 0)"
        if cache and os.path.exists(cache):
            with np.load(cache) as z:
                got = {n: (tuple(z[n].shape), str(z[n].dtype)) for n in z.files}
                if got == want:
                    leaves = [jnp.asarray(z[n]) for n in names]
                    params = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(info), leaves)
                    return params, {"how": how, "source": f"cache {cache}", "seconds": time.perf_counter() - t0}
            print(f"  {cache}: names or shapes differ from this model's, re-initialising", flush=True)
        params = jax.block_until_ready(traced.lower().compile()(jax.random.PRNGKey(0)))
        seconds = time.perf_counter() - t0
        if cache:
            np.savez(cache, **{n: np.asarray(x) for n, x in zip(names, jax.tree_util.tree_leaves(params))})
        return params, {"how": how, "source": "initialised", "seconds": seconds}
    finally:
        jax.config.update("jax_default_prng_impl", prev)


def bench_views(views: int, args) -> dict:
    import jax

    from locojax.models.locosplat import build
    from locojax.render.factory import make_render_fn
    from locojax.train.flops import count_flops_traced

    name = args.config or (f"locosplat_{views}v" if views in PAPER else "locosplat_6v")
    config, random_trunk = _config(name, views, args)
    model = build(config)
    near, far = float(config.data.near), float(config.data.far)
    ctx, tgt = synthetic_views(0, views, args.targets, args.resolution, near, far)
    params, weights = random_params(model, ctx, args.params_cache)
    n_params = int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
    param_bytes = int(sum(x.nbytes for x in jax.tree_util.tree_leaves(params)))

    def encode(p, context):
        pred = model.predict(p, context, train=False)
        return pred.gaussians, pred.aux["num_active_gaussians"]

    render_fn = make_render_fn(config.render, model.sh_degree)

    def render(g, target):
        return render_fn(g, target).rgb

    # One trace and one lowering serve both the FLOP count (cost analysis of the unoptimised HLO, no
    # compile) and the single compilation that is timed.
    t0 = time.perf_counter()
    traced = jax.jit(encode).trace(params, ctx)
    lowered = traced.lower()
    enc_lower = time.perf_counter() - t0
    flops = count_flops_traced(traced.jaxpr, lowered)
    print(f"{name} x{views} views {args.resolution}px {args.precision}: {n_params:,} parameters "
          f"({weights['how']}{', trunk made trainable' if random_trunk else ''}), capacity "
          f"{model.num_gaussians:,} Gaussians, {flops.flops / 1e9:.1f} GFLOP; encoder traced + lowered in "
          f"{enc_lower:.0f} s, compiling (load {os.getloadavg()[0]:.1f}) ...", flush=True)
    t0 = time.perf_counter()
    enc = lowered.compile()
    enc_compile = time.perf_counter() - t0
    print(f"  encoder compiled in {enc_compile:.0f} s, load {os.getloadavg()[0]:.1f}, "
          f"RSS peak {peak_rss_bytes() / 1e9:.1f} GB", flush=True)
    g0, _ = enc(params, ctx)
    t0 = time.perf_counter()
    ren = jax.jit(render).lower(g0, tgt).compile()
    ren_compile = time.perf_counter() - t0

    print(f"  render compiled in {ren_compile:.0f} s", flush=True)
    enc_ms, ren_ms, live, loads = [], [], [], []
    for scene in range(args.scenes):
        ctx, tgt = synthetic_views(scene, views, args.targets, args.resolution, near, far)
        (g, num), sec, warm = timed(enc, params, ctx, repeats=args.repeats, warmup=scene == 0)
        _, rsec, rwarm = timed(ren, g, tgt, repeats=args.repeats, warmup=scene == 0)
        if scene == 0:
            warm_s = {"encoder": warm, "render": rwarm}
        enc_ms.append(sec * 1e3)
        ren_ms.append(rsec * 1e3)
        live.append(int(np.asarray(num)[0]))
        loads.append(os.getloadavg()[0])
        print(f"  scene {scene}: encoder {sec * 1e3:.0f} ms, render {rsec * 1e3:.0f} ms, {live[-1]:,} live anchors, "
              f"load {loads[-1]:.1f}", flush=True)
    enc_b, ren_b = _xla_bytes(enc), _xla_bytes(ren)
    enc_med = float(np.median(enc_ms))
    return {
        "config": name, "views": views, "targets": args.targets, "resolution": args.resolution, "batch": 1,
        "precision": args.precision, "random_weights": True, "synthetic_inputs": True,
        "parameters": n_params, "capacity": int(model.num_gaussians), "live_anchors": int(np.median(live)),
        "encoder_ms": enc_med, "render_ms": float(np.median(ren_ms)),
        "encoder_ms_per_scene": enc_ms, "render_ms_per_scene": ren_ms,
        "weights": weights, "encoder_trace_lower_s": enc_lower,
        "encoder_compile_s": enc_compile, "render_compile_s": ren_compile,
        "load_per_scene": loads, "warmup_s": warm_s, "repeats": args.repeats, "scenes": args.scenes,
        "encoder_gflop": flops.flops / 1e9, "encoder_gflop_xla_uncorrected": flops.xla_flops / 1e9,
        "encoder_gflops_per_s": flops.flops / 1e9 / (enc_med / 1e3),
        "xla_encoder_mb": None if enc_b is None else enc_b / 1e6,
        "xla_render_mb": None if ren_b is None else ren_b / 1e6,
        "xla_peak_mb": None if enc_b is None or ren_b is None else max(enc_b, param_bytes + ren_b) / 1e6,
        "process_peak_rss_mb": peak_rss_bytes() / 1e6, "paper": PAPER.get(views),
    }


def _table(report) -> str:
    rows = [f"LoCoSplat A.1 benchmark: {report['device']} ({report['backend']}, {report['cpu_count']} cores), "
            f"load {report['load_start']:.1f} -> {report['load_end']:.1f}, float32 matmul {report['matmul_gflops_per_s']:.0f} GFLOP/s; random weights, "
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

    load0 = os.getloadavg()[0]
    matmul = matmul_gflops_per_s(args.matmul)
    report = {"device": str(jax.devices()[0].device_kind), "backend": jax.default_backend(),
              "cpu_count": os.cpu_count(), "matmul_gflops_per_s": matmul, "load_start": load0, "results": []}
    for v in str(args.views).split(","):
        r = bench_views(int(v), args)
        r.update(matmul_gflops_per_s=matmul, run_load_start=load0, run_load_end=os.getloadavg()[0],
                 command="python -m experiments.benchmark locosplat " + " ".join(args.argv))
        report["results"].append(r)
        if args.out:  # after every view count: a later one may not fit or finish
            _write_merged(args.out, report)
    report["load_end"] = os.getloadavg()[0]
    print(json.dumps(report, indent=1), flush=True)
    print(_table(report), flush=True)
    return report


def _write_merged(path: str, report: dict) -> None:
    """Write `report` to `path`, keeping the entries of an earlier report there whose (views,
    precision, resolution, targets) this run did not measure (each entry records its own load and
    matmul figures)."""
    key = lambda r: (r["views"], r["precision"], r["resolution"], r["targets"])
    merged = dict(report, results=list(report["results"]))
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        new = {key(r) for r in report["results"]}
        merged["results"] = [r for r in old.get("results", []) if key(r) not in new] + merged["results"]
    merged["results"].sort(key=lambda r: (r["precision"], r["views"]))
    with open(path, "w") as f:
        json.dump(merged, f, indent=2)


def main(argv=None) -> int:
    """CLI entry point (`experiments.benchmark` passes the remaining argv)."""
    import configs

    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse(argv)
    args.argv = argv
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
