"""Train the OFFICIAL GlobalSplat code (R-Itk/globalsplat @ feb3fd7, CPU torch) on the embedded
synthetic data with `globalsplat_tiny`'s settings, saving its weights along the way, so that they
can be converted (`python -m experiments.import_weights --family=globalsplat`) and scored by the
project's evaluator on the same held-out scenes as the port (issue 14: "the official code at the
same budget"). Nothing of the official code is stored here; it is read from `--official_root`.

    python experiments/benchmarks/globalsplat_official_train.py --official_root=/path/to/globalsplat \
        --out=/tmp/official_run [--steps=3000] [--stop_at=1000] [--save_every=250] [--max_minutes=25]

Harness (as `tests/fixtures/globalsplat_train/make_official_trajectory.py`, whose stubs it reuses):
Lightning -> a bare module with the optimizer loop written out (backward, clip 1.0, AdamW step,
per-step scheduler); `gsplat.rasterization` (CUDA) -> by default (`--rasterizer=jax`) the project's
JAX rasterizer wrapped as a torch autograd op (`gsplat_stand_ins.jax_rasterization`; `--check_rasterizer` compares
one step's loss and gradients against the other choice), or (`--rasterizer=torch`)
`locojax.render.torch_reference.render_torch` (gsplat's torch projection with the CUDA compositing
rule), which costs 15-30 s a step on the 2-core CPU once the Gaussians cover the image (after stage 0).
The official perceptual term is
`(e0 + VGG-19 feature errors) / 255`; without the user's ImageNet VGG-19 the feature errors are set
to zero, leaving the pixel L1 `e0 / 255`: the same objective as `globalsplat_tiny`
(`loss.perceptual_net = "pixel_l1"`).

Data: the embedded synthetic training split that the port trains on (`--config`'s data settings:
seed 0, `--train_scenes` of them at 64x64, 64 frames), read from the built TFDS dataset under
$LOCOJAX_DATA_DIR (JPEG q95 frames, the same pixels as the port's pipeline); each step draws
`--batch` scenes uniformly and views with
the project's `GlobalSplatSampler` (2 context at the window ends, 4 targets inside a window of
`--min_gap..--max_gap` frames), as the port's training pipeline does (same distribution, not the
same draws). Writes `<out>/curve.json` (per-step loss / train PSNR / lr / time) and
`<out>/official_step<N>.pth` state_dicts.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "globalsplat_train"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(FIXTURE))

import make_official_trajectory as harness  # noqa: E402

from experiments.benchmarks.gsplat_stand_ins import jax_rasterization  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--official_root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--stop_at", type=int, default=0,
                    help="stop (and save) after this many steps of the --steps schedule (0: run it all)")
    ap.add_argument("--save_every", type=int, default=250)
    ap.add_argument("--max_minutes", type=float, default=1e9, help="stop (and save) after this wall time")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--config", default="globalsplat_tiny", help="whose data settings (dataset, size) to read")
    ap.add_argument("--train_scenes", type=int, default=32)
    ap.add_argument("--min_gap", type=int, default=20)
    ap.add_argument("--max_gap", type=int, default=36)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup_steps", type=int, default=50)
    ap.add_argument("--stages", default="300,500,700")
    ap.add_argument("--ramp", type=int, default=50)
    ap.add_argument("--num_latents", type=int, default=256)
    ap.add_argument("--sh_degree", type=int, default=0)
    ap.add_argument("--rasterizer", choices=("jax", "torch"), default="jax",
                    help="jax: the project's rasterizer as a torch autograd op; torch: gsplat's torch pieces")
    ap.add_argument("--check_rasterizer", action="store_true",
                    help="first compare the loss and gradients of the first batch under both rasterizers")
    ap.add_argument("--init_weights", default="", help="start from this official state_dict (diagnosis only: "
                    "the optimizer state is not restored)")
    ap.add_argument("--start_step", type=int, default=0, help="with --init_weights: the schedule step to start at")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)
    harness.install_stubs(torch)
    sys.path.insert(0, args.official_root)
    import gsplat

    torch_raster = harness.torch_rasterization(torch)
    jax_raster = jax_rasterization(torch)
    gsplat.rasterization = jax_raster if args.rasterizer == "jax" else torch_raster
    from globalsplat.dataset.preprocessing import to_model_batch
    from globalsplat.loss import rendering_loss
    from globalsplat.model.globalsplat import GlobalSplat
    from globalsplat.model.model_wrapper import GlobalSplatModule

    from data_pipelines.samplers.globalsplat import GlobalSplatSampler
    from data_pipelines.loading import load_scenes

    # No ImageNet VGG-19 here: the feature errors e1..e5 become 0, the pixel L1 e0 stays (see doc).
    rendering_loss.PerceptualLoss._load_weights = lambda self: None
    rendering_loss.PerceptualLoss._extract_features = lambda self, x: [x.new_zeros(())] * 5

    model = GlobalSplat(sh_degree=args.sh_degree, static_only=True, patch_size=8,
                        latent_rep_token_amount=args.num_latents, dim_latents=64, dim_rays=32, dim_rgb_feat=64,
                        rounds=2, slot_calib_layers_per_round=1, num_heads=4, M_max=16)
    module = GlobalSplatModule(model, learning_rate=args.lr, weight_decay=1e-6,
                               loss_w_dict=dict(w_rgb=2.0, w_mse=1.0, w_depth=0.0, subset_consistency=True,
                                                subset_alpha_consistency_w=1e-3, subset_depth_consistency_w=1e-2),
                               stage_boundaries=tuple(int(s) for s in args.stages.split(",")),
                               stage_ramp_iters=args.ramp, final_stage=3,
                               warmup_pct=args.warmup_steps / args.steps)
    module.train()
    module.trainer.estimated_stepping_batches = args.steps
    opt_cfg = module.configure_optimizers()
    opt, sched = opt_cfg["optimizer"], opt_cfg["lr_scheduler"]["scheduler"]
    params = [p for g in opt.param_groups for p in g["params"]]
    if args.init_weights:
        model.load_state_dict(torch.load(args.init_weights))
    for _ in range(args.start_step):
        sched.step()

    # The port's training split, read from the built TFDS dataset (JPEG q95 frames, exactly what
    # `experiments.train --config=globalsplat_tiny` trains on; built on first use if missing). Ray-casting
    # frames on first use (the first version) cost ~10 CPU-minutes per 60 steps.
    import configs

    cfg = configs.get_config(args.config)
    cfg.data.synthetic_num_train_scenes = args.train_scenes
    scenes = list(load_scenes("synthetic", "train", config=cfg, with_depth=False))
    frames_of = [s.images for s in scenes]  # uint8 [F, H, W, 3] each
    num_frames = int(frames_of[0].shape[0])
    print(f"{len(scenes)} training scenes ({scenes[0].key} ..), {num_frames} frames of "
          f"{frames_of[0].shape[1:3]} from the built dataset", flush=True)

    def frame(i, f):
        return frames_of[i][f]

    sampler = GlobalSplatSampler(num_context_views=2, num_target_views=4, min_gap=args.min_gap,
                                 max_gap=args.max_gap)
    rng = np.random.default_rng(0)
    curve = {k: [] for k in ("step", "loss", "psnr", "l2", "lr", "stage", "wall_s", "cpu_s")}

    def save(step):
        torch.save(model.state_dict(), out / f"official_step{step}.pth")
        (out / "curve.json").write_text(json.dumps({"args": vars(args), **curve}))

    def check_rasterizers(batch, step):
        """Loss and gradients of one batch under gsplat's torch pieces and under the JAX rasterizer."""
        rng_state, res = torch.get_rng_state(), {}
        for name, raster in (("torch", torch_raster), ("jax", jax_raster)):
            torch.set_rng_state(rng_state)  # the same subsets for the consistency term
            gsplat.rasterization = raster
            module.logged = {}
            t = time.time()
            loss = module.training_step(batch, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            res[name] = (float(loss), [p.grad.detach().clone() if p.grad is not None else None for p in params],
                         time.time() - t)
        gsplat.rasterization = jax_raster if args.rasterizer == "jax" else torch_raster
        torch.set_rng_state(rng_state)
        opt.zero_grad(set_to_none=True)
        (lt, gt, st), (lj, gj, sj) = res["torch"], res["jax"]
        pairs = [(a, b) for a, b in zip(gt, gj) if a is not None and b is not None]
        num = sum(float((a - b).pow(2).sum()) for a, b in pairs) ** 0.5
        den = sum(float(a.pow(2).sum()) for a, _ in pairs) ** 0.5
        out = dict(step=step, loss_torch=lt, loss_jax=lj, loss_rel_diff=abs(lj - lt) / abs(lt),
                   grad_norm_torch=den, grad_rel_diff=num / max(den, 1e-30), s_torch=st, s_jax=sj)
        print("rasterizer check:", json.dumps(out), flush=True)
        return out

    t0, c0 = time.time(), time.process_time()
    step = args.start_step
    for step in range(args.start_step, args.steps):
        imgs, ks, c2ws, idxs, n_ctx = [], [], [], [], 2
        for _ in range(args.batch):
            i = int(rng.integers(len(scenes)))
            sel = sampler.sample(rng, num_frames, step)
            frames = np.concatenate([sel.context, sel.target])
            imgs.append(np.stack([frame(i, f) for f in frames]))
            ks.append(scenes[i].intrinsics[frames].astype(np.float32))
            c2ws.append(scenes[i].c2w[frames].astype(np.float32))
            idxs.append(frames)
        img = torch.from_numpy(np.stack(imgs).astype(np.float32) / 255.0).permute(0, 1, 4, 2, 3)
        K, c2w, idx = (torch.from_numpy(np.stack(a)) for a in (ks, c2ws, idxs))
        raw = {"context": {"image": img[:, :n_ctx], "intrinsics": K[:, :n_ctx], "extrinsics": c2w[:, :n_ctx],
                           "index": idx[:, :n_ctx]},
               "target": {"image": img[:, n_ctx:], "intrinsics": K[:, n_ctx:], "extrinsics": c2w[:, n_ctx:],
                          "index": idx[:, n_ctx:]}}
        batch = to_model_batch(raw)
        module.global_step = step
        if args.check_rasterizer and step == args.start_step:
            curve["raster_check"] = check_rasterizers(batch, step)
        module.logged = {}
        lr = opt.param_groups[0]["lr"]
        loss = module.training_step(batch, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        lg = module.logged
        curve["step"].append(step); curve["loss"].append(float(loss)); curve["psnr"].append(lg["train_psnr"])
        curve["l2"].append(lg["train_render_l2_loss"]); curve["lr"].append(lr)
        curve["stage"].append(int(module._stage_schedule(step)[0]))
        curve["wall_s"].append(time.time() - t0); curve["cpu_s"].append(time.process_time() - c0)
        if step % 25 == 0:
            print(f"step {step:5d} loss {float(loss):.5f} psnr {lg['train_psnr']:.2f} lr {lr:.2e} "
                  f"stage {curve['stage'][-1]} [{time.time() - t0:.0f}s wall, {curve['cpu_s'][-1]:.0f}s cpu]",
                  flush=True)
        if (step + 1) % args.save_every == 0:
            save(step + 1)
        if args.stop_at and step + 1 >= args.stop_at:
            print(f"--stop_at: stopping after step {step + 1} of the {args.steps}-step schedule", flush=True)
            break
        if time.time() - t0 > 60 * args.max_minutes:
            print(f"time limit: stopping after step {step + 1}", flush=True)
            break
    save(step + 1)
    print(f"JAX rasterizer pair overflow (must be 0): {jax_raster.overflow['pairs']}")
    print(f"done: {step + 1} steps, {time.time() - t0:.0f}s wall, {time.process_time() - c0:.0f}s cpu")


if __name__ == "__main__":
    main()
