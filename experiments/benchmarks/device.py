"""Device benchmark: `python -m experiments.benchmark device --out=FILE.json [--small]`.

One command for a lent GPU (or TPU), sized to finish in under 8 minutes on one device; `--small`
runs the same sections at CPU sizes (tested in tests/render/test_device_benchmark.py). Every
section records its error in the JSON instead of stopping the run, and sections past `--budget-s`
are recorded as skipped.

1. Rasterizer forward and forward+backward (`rasterize_batch`, mean(rgb) + mean(depth) +
   mean(alpha) w.r.t. every Gaussian field) per compositing backend ("xla", "pallas": see
   `locojax.render.composite_backends`), at 16K, 65K and 393K Gaussians x 1 and 8 views at
   256x256 (`--small`: 1024 and 4096 Gaussians x 1 and 2 views at 64x64): compile time, medians
   after warm-up, overflow, and agreement of the forward images with reference images stored in
   the repo.
2. Reference images: experiments/benchmarks/device_reference/{full,small}_n{N}.npz, rendered on
   CPU by the XLA backend from the seeded scene `make_scene(N, views)` (views 0 and the last one;
   rgb and alpha as uint16 / 65535, depth as float16; compressed). The 1-view case compares view 0.
   Regenerate with `--write-reference` (CPU; add `--small` for the small set).
3. One training step at batch 1 of `locosplat_6v` and `globalsplat_16k` (`--small`: the tiny
   presets) on placeholder data: compile time, first step, median step, peak device memory from
   `device.memory_stats()` (process peak RSS where the backend has none).
4. The data iterator's batches per second with `locosplat_6v`'s data config (sampler, views, image
   size, batch 1) over a synthetic dataset built into a temporary directory (`--data-dir` to use a
   prepared one; re10k itself is not on a lent machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback

import numpy as np

from experiments.benchmarks.timing import timed

REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device_reference")
FULL = dict(tag="full", sizes=(16384, 65536, 393216), views=(1, 8), image=256, reps=5,
            train=("locosplat_6v", "globalsplat_16k"), steps=3, data_scenes=8, data_batches=30)
SMALL = dict(tag="small", sizes=(1024, 4096), views=(1, 2), image=64, reps=1,
             train=("locosplat_tiny", "globalsplat_tiny"), steps=1, data_scenes=2, data_batches=3)
BACKENDS = ("xla", "pallas")
AGREE_ATOL = 1e-3  # rgb / alpha; XLA on CPU vs a device differs by summation order (~1e-6) and by
# Gaussians whose inclusion flips at the T <= 1e-4 stop (then by at most ~1e-4 x colour)
QUANT = 65535.0


def make_scene(n: int, views: int, image: int, seed: int = 0):
    """numpy (Gaussians fields, viewmats [views, 4, 4], K [3, 3]) of the seeded benchmark scene
    (as `experiments.benchmarks.render.make_scene`, at any square image size)."""
    rng = np.random.default_rng(seed)
    f = float(image)
    z = rng.uniform(2.0, 8.0, n)
    u = rng.uniform(-0.1 * image, 1.1 * image, n)
    v = rng.uniform(-0.1 * image, 1.1 * image, n)
    means = np.stack([(u - image / 2) * z / f, (v - image / 2) * z / f, z], -1)
    sigma_px = 4.0 * np.sqrt(16384.0 / n) * image / 256.0
    scales = np.exp(rng.normal(0.0, 0.5, (n, 3))) * sigma_px * z[:, None] / f
    arrays = dict(means=means, quats=rng.normal(size=(n, 4)), scales=scales,
                  opacities=rng.uniform(0.05, 0.95, n), sh=rng.normal(0.0, 0.3, (n, 1, 3)))
    arrays = {key: a.astype(np.float32) for key, a in arrays.items()}
    viewmats = []
    for i in range(views):
        a = 0.03 * i
        m = np.eye(4)
        m[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
        m[:3, 3] = [-0.5 * np.sin(a), 0.02 * i, 0.0]
        viewmats.append(m)
    K = np.array([[f, 0, image / 2], [0, f, image / 2], [0, 0, 1]], np.float32)
    return arrays, np.stack(viewmats).astype(np.float32), K


def _jax_scene(n, views, image):
    import jax.numpy as jnp

    from locojax.types import Camera, Gaussians

    arrays, viewmats, K = make_scene(n, views, image)
    g = Gaussians(**{k: jnp.asarray(v)[None] for k, v in arrays.items()})
    cams = Camera(viewmat=jnp.asarray(viewmats)[None], K=jnp.broadcast_to(jnp.asarray(K), (1, views, 3, 3)))
    return g, cams


def _reference_path(tag: str, n: int) -> str:
    return os.path.join(REFERENCE_DIR, f"{tag}_n{n}.npz")


def write_reference(spec: dict) -> list[str]:
    """Render and store the reference images of `spec` (CPU, XLA backend). Returns the paths."""
    import jax

    from locojax.render import rasterize_batch

    os.makedirs(REFERENCE_DIR, exist_ok=True)
    views, image, paths = max(spec["views"]), spec["image"], []
    keep = sorted({0, views - 1})
    for n in spec["sizes"]:
        g, cams = _jax_scene(n, views, image)
        out = jax.jit(lambda g, c: rasterize_batch(g, c, width=image, height=image, sh_degree=0, backend="xla"))(
            g, cams)
        rgb, alpha, depth = (np.asarray(x)[0, keep] for x in (out.rgb, out.alpha, out.depth))
        path = _reference_path(spec["tag"], n)
        np.savez_compressed(
            path, views=np.asarray(keep, np.int32),
            rgb=np.round(np.clip(rgb, 0, 1) * QUANT).astype(np.uint16),
            alpha=np.round(np.clip(alpha[..., 0], 0, 1) * QUANT).astype(np.uint16),
            depth=depth[..., 0].astype(np.float16), overflow=np.asarray(out.overflow)[0, keep],
            made_by=np.asarray(f"python -m experiments.benchmark device --write-reference"
                               f"{' --small' if spec['tag'] == 'small' else ''}; jax {jax.__version__} on "
                               f"{jax.devices()[0].platform}, backend xla, seed 0"))
        paths.append(path)
    return paths


def agreement(out, ref_path: str, views: int) -> dict:
    """Max / mean abs differences of rgb and alpha and PSNR of rgb against the stored reference
    (its views that this run rendered), and the max relative depth difference where alpha > 0.5."""
    if not os.path.exists(ref_path):
        return dict(error=f"no reference images at {ref_path} (write them with --write-reference)")
    ref = np.load(ref_path)
    idx = [int(i) for i in ref["views"] if i < views]
    sel = [list(ref["views"]).index(i) for i in idx]
    rgb, alpha, depth = (np.asarray(x, np.float64)[0, idx] for x in (out.rgb, out.alpha, out.depth))
    r_rgb = ref["rgb"][sel] / QUANT
    r_alpha = ref["alpha"][sel] / QUANT
    r_depth = ref["depth"][sel].astype(np.float64)
    d_rgb = np.abs(np.clip(rgb, 0, 1) - r_rgb)
    d_alpha = np.abs(np.clip(alpha[..., 0], 0, 1) - r_alpha)
    solid = r_alpha > 0.5
    rel_depth = np.abs(depth[..., 0] - r_depth)[solid] / np.maximum(np.abs(r_depth[solid]), 1e-6)
    mse = float(np.mean(d_rgb ** 2))
    res = dict(views_compared=idx, rgb_max_abs=float(d_rgb.max()), rgb_mean_abs=float(d_rgb.mean()),
               alpha_max_abs=float(d_alpha.max()),
               depth_max_rel=float(rel_depth.max()) if rel_depth.size else 0.0,  # reference depth is float16
               rgb_psnr_db=float("inf") if mse == 0 else float(10 * np.log10(1.0 / mse)))
    res["agrees"] = bool(res["rgb_max_abs"] <= AGREE_ATOL and res["alpha_max_abs"] <= AGREE_ATOL)
    return res


def bench_rasterizer(n: int, views: int, image: int, backend: str, reps: int, tag: str) -> dict:
    import jax
    import jax.numpy as jnp

    from locojax.render import rasterize_batch

    g, cams = _jax_scene(n, views, image)
    render = lambda g: rasterize_batch(g, cams, width=image, height=image, sh_degree=0, backend=backend)  # noqa: E731

    def loss(g):
        out = render(g)
        return jnp.mean(out.rgb) + jnp.mean(out.depth) + jnp.mean(out.alpha), out.overflow

    t = time.perf_counter()
    fwd = jax.jit(render).lower(g).compile()
    fb = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(g).compile()
    compile_s = time.perf_counter() - t
    out = fwd(g)
    jax.block_until_ready(out)
    (_, _), grads = fb(g)
    jax.block_until_ready(grads)
    finite = all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(grads))
    return dict(n=n, views=views, image=image, backend=backend, compile_s=compile_s,
                fwd_s=timed(fwd, g, repeats=reps, warmup=False)[1],
                fwd_bwd_s=timed(fb, g, repeats=reps, warmup=False)[1],
                overflow=int(np.sum(np.asarray(out.overflow))), grads_finite=finite,
                agreement=agreement(out, _reference_path(tag, n), views))


def _peak_memory(before_rss: int | None = None) -> dict:
    import jax

    from experiments.benchmarks.process_memory import peak_rss_bytes

    stats = None
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # backends without memory statistics
        stats = None
    if stats and "peak_bytes_in_use" in stats:
        return dict(peak_device_bytes=int(stats["peak_bytes_in_use"]), memory_source="device.memory_stats()")
    return dict(peak_rss_bytes=peak_rss_bytes(), memory_source="process peak RSS (no device memory_stats)")


def bench_train_step(name: str, steps: int, overrides=()) -> dict:
    import jax

    import configs
    from locojax.train import aot
    from locojax.train import sharding as shd
    from locojax.train.run import build_run, placeholder_batch
    from locojax.train.state import create_state

    config = configs.get_config(name)
    configs.apply_overrides(config, list(overrides))
    config.batch_size = 1
    compiled, info = aot.compile_train_step(config)
    run = build_run(config, placeholder_batch(config))
    state = create_state(run.init_fn, jax.random.PRNGKey(0), run.example_batch, run.state_shardings)
    batch = shd.global_batch(placeholder_batch(config), run.mesh)
    t = time.perf_counter()
    state, m = compiled(state, batch)
    jax.block_until_ready(m)
    first = time.perf_counter() - t
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        state, m = compiled(state, batch)
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t)
    res = dict(config=name, overrides=list(overrides), batch_size=1, num_gaussians=info.get("num_gaussians"),
               compile_s=info["lower_seconds"] + info["compile_seconds"], first_step_s=first,
               step_s=statistics.median(times), steps_timed=steps,
               xla_temp_bytes=info.get("temp_size_in_bytes"), data="placeholder batch (zero images)")
    res.update(_peak_memory())
    return res


def bench_data(spec: dict, data_dir: str | None) -> dict:
    import configs
    from data_pipelines.iterators import make_train_iterator

    config = configs.get_config("locosplat_6v")
    config.batch_size = 1
    tmp = None
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="locojax_device_data_")
        config.dataset = "synthetic"
        d = config.data
        d.data_dir = tmp
        d.synthetic_num_train_scenes = spec["data_scenes"]
        d.synthetic_num_test_scenes = 1
        d.build_workers = max(1, min(8, os.cpu_count() or 1))
        if spec["tag"] == "small":
            d.synthetic_image_size, d.image_shape = 32, (32, 32)
    else:
        config.data.data_dir = data_dir
    try:
        t = time.perf_counter()
        it = make_train_iterator(config)
        batch = next(it)  # builds the synthetic dataset on first use
        setup = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(spec["data_batches"]):
            batch = next(it)
        dt = time.perf_counter() - t
        close = getattr(it, "close", None)
        if close is not None:
            close()
    finally:
        if tmp is not None:  # the dataset built here, and nothing else
            shutil.rmtree(tmp, ignore_errors=True)
    return dict(config="locosplat_6v", dataset=str(config.dataset), data_dir=data_dir or "(temporary, built here)",
                image_shape=list(batch.target.images.shape[-3:-1]), batch_size=1,
                batches=spec["data_batches"], batches_per_s=spec["data_batches"] / dt, setup_s=setup)


def _guarded(fn, *args) -> dict:
    try:
        return fn(*args)
    except Exception as e:  # recorded, never fatal: the run goes on to the next section
        return dict(error=f"{type(e).__name__}: {e}"[:2000], traceback=traceback.format_exc()[-4000:])


def pallas_available() -> str | None:
    """None if the pallas backend can be built here, else why not."""
    try:
        import locojax.render.composite_backends  # noqa: F401
        import locojax.render.pallas.triton_composite  # noqa: F401
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def run(spec: dict, *, budget_s: float, data_dir: str | None, sections=("raster", "train", "data")) -> dict:
    import jax

    t0 = time.perf_counter()
    dev = jax.devices()[0]
    report = dict(command=" ".join(["python -m experiments.benchmark device"] + sys.argv[1:]),
                  jax=jax.__version__, platform=dev.platform, device_kind=dev.device_kind,
                  device_count=jax.device_count(), spec={k: list(v) if isinstance(v, tuple) else v
                                                         for k, v in spec.items()},
                  budget_s=budget_s, rasterizer=[], train_steps=[], data=None)
    over = lambda: time.perf_counter() - t0 > budget_s  # noqa: E731
    why_not = pallas_available()
    if why_not:
        report["pallas_unavailable"] = why_not
    if "raster" in sections:
        for n in spec["sizes"]:
            for views in spec["views"]:
                for backend in BACKENDS:
                    case = dict(n=n, views=views, backend=backend)
                    if backend == "pallas" and why_not:
                        case["error"] = f"pallas backend unavailable: {why_not}"
                    elif over():
                        case["skipped"] = f"time budget of {budget_s:.0f} s spent"
                    else:
                        case = dict(case, **_guarded(bench_rasterizer, n, views, spec["image"], backend,
                                                     spec["reps"], spec["tag"]))
                    report["rasterizer"].append(case)
                    print(json.dumps(case), flush=True)
    if "train" in sections:
        for name in spec["train"]:
            res = dict(config=name, skipped=f"time budget of {budget_s:.0f} s spent") if over() else \
                dict(dict(config=name), **_guarded(bench_train_step, name, spec["steps"], spec.get("overrides", ())))
            report["train_steps"].append(res)
            print(json.dumps({k: v for k, v in res.items() if k != "traceback"}), flush=True)
    if "data" in sections:
        report["data"] = dict(skipped="time budget spent") if over() else _guarded(bench_data, spec, data_dir)
        print(json.dumps({k: v for k, v in report["data"].items() if k != "traceback"}), flush=True)
    report["seconds"] = time.perf_counter() - t0
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark device", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="write the JSON report here")
    parser.add_argument("--small", action="store_true", help="CPU sizes (see the module docstring)")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="start no new case after this many seconds (default 420: 8 minutes in all)")
    parser.add_argument("--sections", default="raster,train,data", help="comma-separated subset of raster,train,data")
    parser.add_argument("--data-dir", default=None, help="a prepared dataset for locosplat_6v's iterator")
    parser.add_argument("--write-reference", action="store_true",
                        help="render and store the reference images (on CPU) instead of benchmarking")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="override the Gaussian counts")
    parser.add_argument("--views", type=int, nargs="*", default=None, help="override the view counts")
    parser.add_argument("--train", nargs="*", default=None, help="override the presets of the training steps")
    parser.add_argument("--train-override", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for the training-step presets (repeatable), e.g. model.num_latents=64")
    args = parser.parse_args(argv)
    spec = dict(SMALL if args.small else FULL)
    for key in ("sizes", "views", "train"):
        if getattr(args, key) is not None:
            spec[key] = tuple(getattr(args, key))
    spec["overrides"] = tuple(args.train_override)
    if args.write_reference:
        for p in write_reference(spec):
            print(f"wrote {p} ({os.path.getsize(p) / 1e6:.2f} MB)")
        return 0
    report = run(spec, budget_s=args.budget_s, data_dir=args.data_dir,
                 sections=tuple(s.strip() for s in args.sections.split(",") if s.strip()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
