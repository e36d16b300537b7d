"""Rasterizer benchmark: `python -m experiments.benchmark render [--quick]` (or
`python -m experiments.benchmarks.render`).

For N in {16384, 65536, 393216} Gaussians at 256x256 and 1 and 8 views it prints the forward and
forward+backward medians after warm-up, the compile time, peak memory (XLA's memory analysis of the
compiled fwd+bwd executable: arguments + outputs + temporaries; and the process's peak RSS) and the
overflow; for single views also the same scene through the torch reference (gsplat 1.5.3's torch
projection/SH + `locojax.render.torch_reference`'s tile compositor, torch autograd) and the ratio.
Finally an XLA memory-analysis estimate of one fwd+bwd of 1,572,864 Gaussians into 8 views.

Scene ("trained-3DGS-like"): Gaussians uniform in the view frustum (+10% margin) at depth 2-8,
anisotropic scales log-normal around a screen-space sigma of 4 px at N = 16384, shrinking as
1/sqrt(N) so that the depth complexity stays the same for larger N; random rotations, opacities
U(0.05, 0.95), SH degree 0 (--sh-degree to change). The 8 views are small rotations/translations
of the first camera, rendered by `rasterize_batch` (one scene x 8 views). Loss for backward:
mean(rgb) + mean(depth) + mean(alpha) with gradients w.r.t. all Gaussian fields.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

SIZES = (16384, 65536, 393216)
WIDTH = HEIGHT = 256


def make_scene(n: int, views: int, *, sh_degree: int = 0, seed: int = 0):
    """numpy arrays of one scene and `views` cameras (see the module docstring)."""
    rng = np.random.default_rng(seed)
    f = 256.0
    z = rng.uniform(2.0, 8.0, n)
    u = rng.uniform(-0.1 * WIDTH, 1.1 * WIDTH, n)
    v = rng.uniform(-0.1 * HEIGHT, 1.1 * HEIGHT, n)
    means = np.stack([(u - WIDTH / 2) * z / f, (v - HEIGHT / 2) * z / f, z], -1)
    sigma_px = 4.0 * np.sqrt(16384.0 / n)
    scales = np.exp(rng.normal(0.0, 0.5, (n, 3))) * sigma_px * z[:, None] / f
    k = (sh_degree + 1) ** 2
    arrays = dict(means=means, quats=rng.normal(size=(n, 4)), scales=scales,
                  opacities=rng.uniform(0.05, 0.95, n), sh=rng.normal(0.0, 0.3, (n, k, 3)))
    arrays = {key: a.astype(np.float32) for key, a in arrays.items()}
    viewmats = []
    for i in range(views):
        a = 0.03 * i
        rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
        m = np.eye(4)
        m[:3, :3] = rot
        m[:3, 3] = [-0.1 * np.sin(a) * 5, 0.02 * i, 0.0]
        viewmats.append(m)
    K = np.array([[f, 0, WIDTH / 2], [0, f, HEIGHT / 2], [0, 0, 1]], np.float32)
    return arrays, np.stack(viewmats).astype(np.float32), K


def _median_time(fn, reps: int) -> float:
    import jax

    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_jax(arrays, viewmats, K, *, sh_degree: int, reps: int) -> dict:
    import jax
    import jax.numpy as jnp

    from locojax.render import rasterize, rasterize_batch
    from locojax.types import Camera, Gaussians

    g = Gaussians(**{k: jnp.asarray(v) for k, v in arrays.items()})
    views = viewmats.shape[0]
    kw = dict(width=WIDTH, height=HEIGHT, sh_degree=sh_degree)
    if views == 1:
        cam = Camera(viewmat=jnp.asarray(viewmats[0]), K=jnp.asarray(K))
        render = lambda g: rasterize(g, cam, **kw)
    else:
        cams = Camera(viewmat=jnp.asarray(viewmats)[None], K=jnp.broadcast_to(jnp.asarray(K), (1, views, 3, 3)))
        render = lambda g: rasterize_batch(jax.tree_util.tree_map(lambda x: x[None], g), cams, **kw)

    def loss(g):
        out = render(g)
        return jnp.mean(out.rgb) + jnp.mean(out.depth) + jnp.mean(out.alpha), out.overflow

    t = time.perf_counter()
    fwd = jax.jit(render).lower(g).compile()
    fb = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(g).compile()
    compile_s = time.perf_counter() - t
    mem = fb.memory_analysis()
    xla_bytes = None if mem is None else (mem.argument_size_in_bytes + mem.output_size_in_bytes
                                          + mem.temp_size_in_bytes)
    out = fwd(g)
    jax.block_until_ready(out)  # warm-up
    jax.block_until_ready(fb(g))
    return dict(fwd=_median_time(lambda: fwd(g), reps), fb=_median_time(lambda: fb(g), reps),
                compile=compile_s, xla_gb=None if xla_bytes is None else xla_bytes / 1e9,
                overflow=int(np.sum(np.asarray(out.overflow))))


def bench_torch(arrays, viewmat, K, *, sh_degree: int, reps: int, threads: int) -> dict:
    import torch

    from locojax.render.torch_reference import render_torch

    torch.set_num_threads(threads)

    def run(backward: bool):
        t = {k: torch.tensor(v, requires_grad=backward) for k, v in arrays.items()}
        with torch.set_grad_enabled(backward):
            out = render_torch(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"],
                               torch.tensor(viewmat), torch.tensor(K), width=WIDTH, height=HEIGHT,
                               sh_degree=sh_degree, use_gsplat_isect=False)
            if backward:
                (out["rgb"].mean() + out["depth"].mean() + out["alpha"].mean()).backward()

    def timed(backward):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            run(backward)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    run(True)  # warm-up
    return dict(fwd=timed(False), fb=timed(True))


def memory_estimate_large(*, n: int = 1572864, views: int = 8, sh_degree: int = 0) -> float | None:
    """XLA memory analysis (GB) of one fwd+bwd of n Gaussians into `views` views (compiled, not run)."""
    import jax
    import jax.numpy as jnp

    from locojax.render import rasterize_batch
    from locojax.types import Camera, Gaussians

    k = (sh_degree + 1) ** 2
    spec = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
    g = Gaussians(means=spec(1, n, 3), quats=spec(1, n, 4), scales=spec(1, n, 3), opacities=spec(1, n),
                  sh=spec(1, n, k, 3))
    cams = Camera(viewmat=spec(1, views, 4, 4), K=spec(1, views, 3, 3))

    def loss(g, c):
        out = rasterize_batch(g, c, width=WIDTH, height=HEIGHT, sh_degree=sh_degree)
        return jnp.mean(out.rgb) + jnp.mean(out.depth) + jnp.mean(out.alpha)

    mem = jax.jit(jax.grad(loss)).lower(g, cams).compile().memory_analysis()
    if mem is None:
        return None
    return (mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes) / 1e9


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only N=16384 (1 and 8 views), fewer repetitions")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="override the Gaussian counts")
    parser.add_argument("--views", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--sh-degree", type=int, default=0)
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions (default 5, quick 3)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch reference")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads (default 1: with small per-tile ops, more threads were "
                             "slower on the shared 2-core machine)")
    parser.add_argument("--no-large", action="store_true", help="skip the 1.57M x 8 views memory estimate")
    args = parser.parse_args(argv)
    sizes = args.sizes or ((SIZES[0],) if args.quick else SIZES)
    reps = args.reps or (3 if args.quick else 5)

    import jax

    print(f"rasterizer benchmark: {WIDTH}x{HEIGHT}, SH degree {args.sh_degree}, jax {jax.__version__} on "
          f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind}); medians of {reps} after warm-up")
    header = (f"{'N':>8} {'views':>5} | {'fwd s':>7} {'fwd+bwd s':>9} {'compile s':>9} {'XLA GB':>7} "
              f"{'RSS GB':>6} {'overflow':>8} | {'torch fwd':>9} {'torch f+b':>9} {'speedup f+b':>11}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        for views in args.views:
            arrays, viewmats, K = make_scene(n, views, sh_degree=args.sh_degree)
            r = bench_jax(arrays, viewmats, K, sh_degree=args.sh_degree, reps=reps)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB -> GB (approx.)
            t = None
            if views == 1 and not args.no_torch:
                try:
                    t = bench_torch(arrays, viewmats[0], K, sh_degree=args.sh_degree, reps=max(1, reps // 2),
                                    threads=args.torch_threads)
                except ImportError as e:  # torch/gsplat are test extras
                    print(f"(torch reference skipped: {e})")
            print(f"{n:>8} {views:>5} | {r['fwd']:>7.3f} {r['fb']:>9.3f} {r['compile']:>9.1f} "
                  f"{_fmt(r['xla_gb'], '7.2f')} {rss:>6.2f} {r['overflow']:>8d} | "
                  f"{_fmt(t and t['fwd'], '9.3f')} {_fmt(t and t['fb'], '9.3f')} "
                  f"{_fmt(t and t['fb'] / r['fb'], '10.1f') + ('x' if t else '')}", flush=True)
    if not args.no_large:
        gb = memory_estimate_large(sh_degree=args.sh_degree)
        print(f"XLA memory analysis, one fwd+bwd of 1,572,864 Gaussians into 8 views at {WIDTH}x{HEIGHT}: "
              f"{_fmt(gb, '.2f')} GB (must fit in 80 GB)")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
