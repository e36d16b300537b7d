"""TokenGS / LocusGS forward latency (the LocusGS paper: A100, 4096 tokens, DL3DV 4 views 448x256:
TokenGS 341 ms, LocusGS 407 ms).

    python -m experiments.benchmark locusgs [--configs=tokengs_4096,locusgs_4096] [--settings=dl3dv,re10k]
        [--repeats=2] [--dtype=float32|bfloat16] [--set=model.KEY=VALUE ...] [--out=FILE.json]

Settings (batch 1): dl3dv = 4 context views at 256x448 (H x W), re10k = 2 views at 256x256.
Reports per (config, setting): forward latency of `predict` (images -> Gaussians, jitted; compile and
first run excluded; median of --repeats), its FLOPs (locojax.train.flops.count_flops, XLA cost
analysis with scan trip counts), achieved FLOP/s, a float32 2048^2 matmul's FLOP/s on the same device,
and the paper's A100 figure where it exists. On a CPU the full-size forward takes tens of seconds;
--set model.num_tokens=... / model.dim=... shrink it (say so when reporting).
"""

from __future__ import annotations

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks.timing import matmul_gflops_per_s, timed

SETTINGS = {"dl3dv": (4, 256, 448), "re10k": (2, 256, 256)}
PAPER_A100_MS = {("tokengs", "dl3dv"): 341.0, ("locusgs", "dl3dv"): 407.0}


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m experiments.benchmark locusgs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="tokengs_4096,locusgs_4096")
    ap.add_argument("--settings", default="dl3dv,re10k")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dtype", default=None, choices=[None, "float32", "bfloat16"])
    ap.add_argument("--set", action="append", default=[], help="config override KEY=VALUE (repeatable)")
    ap.add_argument("--matmul", type=int, default=2048)
    ap.add_argument("--out", default=None)
    return ap.parse_args(argv)


def _views(v, h, w):
    from locojax.types import Views

    rng = np.random.default_rng(0)
    c2w = np.tile(np.eye(4, dtype=np.float32), (1, v, 1, 1))
    c2w[0, :, 0, 3] = np.linspace(0.0, 1.0, v)  # a sideways rig: context 0 at the origin, 1 unit span
    K = np.tile(np.array([[0.9, 0, 0.5], [0, 0.9 * w / h, 0.5], [0, 0, 1]], np.float32), (1, v, 1, 1))
    return Views(images=jnp.asarray(rng.uniform(0, 1, (1, v, h, w, 3)), jnp.float32), intrinsics=jnp.asarray(K),
                 c2w=jnp.asarray(c2w), near=jnp.full((1, v), 0.025), far=jnp.full((1, v), 125.0),
                 index=jnp.zeros((1, v), jnp.int32))


def bench_one(name, setting, args) -> dict:
    import configs
    from locojax.models.locusgs import build
    from locojax.train.flops import count_flops

    config = configs.get_config(name)
    if args.dtype:
        config.precision = args.dtype
    configs.apply_overrides(config, args.set)
    model = build(config)
    v, h, w = SETTINGS[setting]
    ctx = _views(v, h, w)
    params = jax.jit(lambda k: model.net.init(k, ctx.images, ctx.c2w, ctx.intrinsics)["params"])(jax.random.PRNGKey(0))
    n_params = int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
    fwd = jax.jit(lambda p, c: model.predict(p, c).gaussians.means)
    flops = count_flops(lambda p, c: model.predict(p, c).gaussians.means, params, ctx).flops
    print(f"{name} {setting}: {n_params:,} params, {model.num_gaussians:,} Gaussians, {flops / 1e9:.0f} GFLOP; timing",
          flush=True)
    _, sec, _ = timed(fwd, params, ctx, repeats=args.repeats)
    family = "locusgs" if config.model.anchors else "tokengs"
    out = {"config": name, "setting": setting, "views": v, "height": h, "width": w, "batch": 1,
           "dtype": str(config.precision), "overrides": list(args.set), "parameters": n_params,
           "num_tokens": int(config.model.num_tokens), "num_gaussians": int(model.num_gaussians),
           "forward_ms": sec * 1e3, "forward_gflop": flops / 1e9, "achieved_gflops_per_s": flops / sec / 1e9,
           "paper_a100_ms": PAPER_A100_MS.get((family, setting))}
    print(json.dumps(out), flush=True)
    return out


def run(args) -> dict:
    results = [bench_one(n, s, args) for n in args.configs.split(",") for s in args.settings.split(",")]
    report = {"device": str(jax.devices()[0].device_kind), "backend": jax.default_backend(),
              "matmul_gflops_per_s": matmul_gflops_per_s(args.matmul), "results": results}
    for r in results:
        r["fraction_of_matmul"] = r["achieved_gflops_per_s"] / report["matmul_gflops_per_s"]
    print(json.dumps(report, indent=2), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return report


def main(argv=None) -> int:
    run(_parse(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    main()
