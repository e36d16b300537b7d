"""Train the OFFICIAL TokenGS code (nv-tlabs/TokenGS @ e558a43, CPU torch, float32) on the embedded
synthetic data with `tokengs_tiny`'s widths, sampler, objective, schedule and batch, saving its weights,
so that `python -m experiments.import_weights --family=locusgs --config=tokengs_tiny` converts them and
the project's evaluator scores them on the same held-out scenes as the port (issue 26, following
issue 14's `globalsplat_official_train.py`). Nothing of the official code is stored here; it is
imported from `--official_root`.

    python experiments/benchmarks/tokengs_official_train.py --official_root=/path/to/TokenGS \
        --out=/tmp/official_run [--steps=2000] [--save_every=500] [--check_rasterizer] \
        [--trajectory=FILE --trajectory_steps=6]

What runs is the official code: `TokenGS` (`tokengs/models/tokengs.py`) with `Options` set to the
tiny widths, its `forward` (split_data -> encoder/decoder -> `GaussianRenderer` -> `compute_tokengs_loss`:
MSE + 0.2 (1 - fused SSIM) / 2 + 1.0 L_vis on every projected centre, clamp 1.0), the batch dict from
the official `Provider._preprocess` (poses relative to input view 0, times 1 / max input-camera distance:
`camera_scale_method="distance"` with scene scale 1, the port's `pose_scale="context"`; ImageNet-normalised
RGB + the official Plücker map), and `tokengs/train.py`'s `setup_optimizer` (AdamW betas (0.9, 0.95),
wd 0.05 on >= 2-D non-head parameters) and `setup_scheduler` (OneCycleLR, cosine, beta1 cycling).
The harness around it:
  * packages the model never calls (tyro, lpips, plyfile, torchvision, accelerate, safetensors,
    tensorboard) are stubbed so the modules import; `Provider._preprocess` runs on a stand-in `self`
    whose image transform is the identity (frames are already 64x64) and whose normaliser is ImageNet's;
  * the fused-ssim CUDA kernels behind the official `fused_ssim` are `fused_ssim_stand_in` (the
    kernel's arithmetic in torch);
  * `gsplat.rasterization` (CUDA) is the project's JAX rasterizer as a torch autograd op
    (`gsplat_stand_ins.jax_rasterization`); `--check_rasterizer` compares the first batch's loss and
    gradients against gsplat's torch pieces (`gsplat_stand_ins.torch_rasterization`);
  * train.py's step is written out (zero_grad, forward, backward, clip 1.0, optimizer and scheduler
    step) without accelerate; float32 throughout (the official bf16 autocast is a GPU setting; the
    port's tiny preset is float32 too).
Data: the port's training split read from the built TFDS dataset ($LOCOJAX_DATA_DIR; the JPEG q95
frames `experiments.train --config=tokengs_tiny` trains on); each step draws `--batch` scenes uniformly
and views with the port's `TokenGSSampler` (2 context at the ends of a U{10, 40} gap, 4 targets inside
it), the same distribution as the port's pipeline, not the same draws.
Writes `<out>/curve.json` (per step: loss and its terms, train PSNR, lr, beta1, gradient norm, time)
and `<out>/official_step<N>.pth` state_dicts (N = 0 is the initialisation). `--trajectory` also writes
the first `--trajectory_steps` steps (frames, cameras, initial weights, official losses and gradient
norms) for tests/models/locusgs/test_tokengs_side_by_side.py.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import types

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from experiments.benchmarks import fused_ssim_stand_in  # noqa: E402
from experiments.benchmarks.gsplat_stand_ins import jax_rasterization, torch_rasterization  # noqa: E402

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def install_stubs():
    """Modules that the official model / train.py import but never call in this run."""
    sys.path.insert(0, str(REPO / "tests" / "fixtures" / "locusgs"))
    import make_fixture  # the forward fixture's stubs: tyro, lpips, plyfile, torchvision

    import gsplat.rendering  # noqa: F401  the real package (its torch pieces are the reference); kept by the stubs

    make_fixture._stub_modules()

    def stub(name, **attrs):
        mod = sys.modules.get(name) or types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        sys.modules[name] = mod

    unavailable = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stub: not available here"))  # noqa: E731
    stub("accelerate", Accelerator=unavailable, DataLoaderConfiguration=unavailable)
    stub("safetensors")
    stub("safetensors.torch", load_file=unavailable)
    stub("torch.utils.tensorboard", SummaryWriter=unavailable)


def official_options(Options, args):
    """The official Options at `tokengs_tiny`'s sizes (configs/locusgs.py:_tiny, anchors off)."""
    import configs

    cfg = configs.get_config(args.config)
    m, lc, opt = cfg.model, cfg.loss, cfg.optimizer
    assert not m.anchors and tuple(m.supervised_layers) == (m.decoder_layers,), "a TokenGS (anchors off) preset"
    g = int(round(m.gaussians_per_token ** 0.5))
    assert g * g == m.gaussians_per_token, "official head: dec_patch_size ** 2 Gaussians per token"
    h, w = cfg.data.image_shape
    assert abs(lc.mse_weight - 1.0) < 1e-12 and lc.vis_clamp == 1.0, "official objective weights"
    return Options(
        img_size=(h, w), patch_size=m.patch, dec_patch_size=g, enc_depth=m.encoder_layers,
        dec_depth=m.decoder_layers, enc_embed_dim=m.dim, enc_num_heads=m.heads, num_gs_tokens=m.num_tokens,
        token_dim=m.dim, gaussian_scale_cap=float(m.scale_max), num_input_views=cfg.data.num_context_views,
        num_views=cfg.data.num_context_views + cfg.data.num_target_views, znear=float(cfg.render.near),
        zfar=float(cfg.render.far), camera_normalization_method="first_cam", camera_scale_method="distance",
        batch_size=args.batch, num_epochs=1, lr=float(opt.learning_rate),
        pct_start_steps=int(round(opt.one_cycle_pct_start * args.steps)),
        final_div_factor=float(opt.one_cycle_final_div_factor), gradient_clip=float(opt.grad_clip_norm),
        mixed_precision="no", lambda_ssim=float(lc.dssim_weight), lambda_visibility=float(lc.vis_weight),
        visibility_distance_threshold=float(lc.vis_clamp), lambda_lpips=0.0, random_reflect=False,
        seed=args.seed), cfg


def make_preprocess(torch, opt):
    """The official `Provider._preprocess` bound to a stand-in `self` (identity image transform: the
    frames already have the model's size; ImageNet normaliser; scene scale 1 with the "distance" method)."""
    from tokengs.data.provider import Provider

    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    owner = types.SimpleNamespace(
        opt=opt, scene_scale=1.0, training=False, generator=None,
        image_transform=types.SimpleNamespace(preprocess_images=lambda x: (x, (0.0, 0.0), (1.0, 1.0), None)),
        input_normalizer=lambda x: (x - mean) / std)
    return lambda *a: Provider._preprocess(owner, *a)


def official_sample(torch, preprocess, scene, frames):
    """One training sample in the official provider's layout. frames: context then targets."""
    h, w = scene.images.shape[1:3]
    rgbs = torch.from_numpy(scene.images[frames].astype(np.float32) / np.float32(255.0)).permute(0, 3, 1, 2)
    k = scene.intrinsics[frames]  # normalised 3x3 -> official pixel (fx, fy, cx, cy)
    intr = torch.from_numpy(np.stack([k[:, 0, 0] * w, k[:, 1, 1] * h, k[:, 0, 2] * w, k[:, 1, 2] * h], -1)
                            .astype(np.float32))
    c2w = torch.from_numpy(scene.c2w[frames].astype(np.float32))
    ones = torch.ones_like(rgbs[:, :1])
    return preprocess(rgbs, ones, ones, c2w, intr, torch.zeros(len(frames)), False)


def collate(torch, samples):
    return {k: (torch.stack([s[k] for s in samples]) if torch.is_tensor(samples[0][k])
                else torch.tensor([s[k] for s in samples])) for k in samples[0]}


def grad_norm(params):
    return float(sum(float(p.grad.detach().double().pow(2).sum()) for p in params if p.grad is not None) ** 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--official_root", required=True, help="checkout of nv-tlabs/TokenGS (holds tokengs/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="tokengs_tiny", help="the port preset whose settings to use")
    ap.add_argument("--steps", type=int, default=2000, help="schedule length (OneCycleLR total_steps)")
    ap.add_argument("--stop_at", type=int, default=0, help="stop (and save) after this many steps (0: all)")
    ap.add_argument("--save_every", type=int, default=500)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="torch init and the sampler's numpy stream")
    ap.add_argument("--check_rasterizer", action="store_true",
                    help="compare the first batch's loss and gradients under both rasterizers first")
    ap.add_argument("--trajectory", default="", help="write the first --trajectory_steps steps here (.npz)")
    ap.add_argument("--trajectory_steps", type=int, default=6)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    torch.set_num_threads(2)
    torch.set_flush_denormal(True)  # as XLA on CPU
    install_stubs()
    sys.path.insert(0, args.official_root)
    from tokengs.options import Options

    opt, cfg = official_options(Options, args)
    import tokengs.rendering.fused_ssim  # noqa: F401
    import tokengs.rendering.gs  # noqa: F401

    # the submodules themselves (tokengs/rendering/__init__.py re-exports a function named fused_ssim)
    official_ssim, official_gs = (sys.modules[f"tokengs.rendering.{m}"] for m in ("fused_ssim", "gs"))
    from tokengs import train as official_train
    from tokengs.models.tokengs import TokenGS

    jax_raster, torch_raster = jax_rasterization(torch), torch_rasterization(torch)
    official_gs.rasterization = jax_raster
    official_ssim.fusedssim, official_ssim.fusedssim_backward = fused_ssim_stand_in.fusedssim, \
        fused_ssim_stand_in.fusedssim_backward
    torch.manual_seed(args.seed)
    model = TokenGS(opt)
    model.train()
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = official_train.setup_optimizer(opt, model, None, 0)
    scheduler = official_train.setup_scheduler(opt, optimizer, args.steps, None, 0)
    params = [p for p in model.parameters() if p.requires_grad]
    print(f"official TokenGS: {sum(p.numel() for p in params):,} parameters, {opt.num_gs_tokens} tokens x "
          f"{opt.dec_patch_size ** 2} Gaussians, schedule {args.steps} steps (peak lr {opt.lr} at "
          f"{opt.pct_start_steps})", flush=True)

    from data_pipelines.loading import load_scenes
    from data_pipelines.registry import make_sampler

    scenes = list(load_scenes("synthetic", "train", config=cfg, with_depth=False))
    d = cfg.data
    sampler = make_sampler(d.sampler, dataset="synthetic", num_context_views=d.num_context_views,
                           num_target_views=d.num_target_views, min_gap=d.get("min_gap"), max_gap=d.get("max_gap"))
    num_frames = int(scenes[0].images.shape[0])
    print(f"{len(scenes)} training scenes, {num_frames} frames of {scenes[0].images.shape[1:3]}; {sampler}", flush=True)
    preprocess = make_preprocess(torch, opt)
    rng = np.random.default_rng(args.seed)

    keys = ("step", "loss", "loss_rgb", "loss_ssim", "loss_visibility", "psnr", "lr", "beta1", "grad_norm",
            "wall_s", "cpu_s")
    curve = {k: [] for k in keys}
    traj = {k: [] for k in ("scene", "frames", "loss", "loss_rgb", "loss_ssim", "loss_visibility", "grad_norm",
                            "lr", "beta1")}

    def save(step):
        torch.save(model.state_dict(), out / f"official_step{step}.pth")
        (out / "curve.json").write_text(json.dumps({"args": vars(args), **curve}))

    def check_rasterizers(data):
        res = {}
        for name, raster in (("torch", torch_raster), ("jax", jax_raster)):
            official_gs.rasterization = raster
            optimizer.zero_grad(set_to_none=True)
            t = time.time()
            loss = model(data)["loss"]
            loss.backward()
            res[name] = float(loss), [p.grad.detach().clone() for p in params], time.time() - t
        official_gs.rasterization = jax_raster
        optimizer.zero_grad(set_to_none=True)
        (lt, gt, st), (lj, gj, sj) = res["torch"], res["jax"]
        num = sum(float((a - b).double().pow(2).sum()) for a, b in zip(gt, gj)) ** 0.5
        den = sum(float(a.double().pow(2).sum()) for a in gt) ** 0.5
        r = dict(loss_torch=lt, loss_jax=lj, loss_rel_diff=abs(lj - lt) / abs(lt), grad_norm_torch=den,
                 grad_rel_diff=num / max(den, 1e-30), s_torch=st, s_jax=sj)
        print("rasterizer check:", json.dumps(r), flush=True)
        return r

    save(0)
    t0, c0 = time.time(), time.process_time()
    step = 0
    for step in range(args.steps):
        picks = []
        for _ in range(args.batch):
            i = int(rng.integers(len(scenes)))
            sel = sampler.sample(rng, num_frames, step)
            picks.append((i, np.concatenate([sel.context, sel.target]).astype(np.int64)))
        data = collate(torch, [official_sample(torch, preprocess, scenes[i], f) for i, f in picks])
        if args.check_rasterizer and step == 0:
            curve["raster_check"] = check_rasterizers(data)
        lr, beta1 = optimizer.param_groups[0]["lr"], optimizer.param_groups[0]["betas"][0]
        optimizer.zero_grad()
        res = model(data)
        res["loss"].backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), opt.gradient_clip))
        optimizer.step()
        scheduler.step()
        vals = {k: float(res[k]) for k in ("loss", "loss_rgb", "loss_ssim", "loss_visibility", "psnr")}
        for k, v in dict(step=step, **vals, lr=lr, beta1=beta1, grad_norm=gn, wall_s=time.time() - t0,
                         cpu_s=time.process_time() - c0).items():
            curve[k].append(v)
        if args.trajectory and step < args.trajectory_steps:
            traj["scene"].append([i for i, _ in picks]); traj["frames"].append([f for _, f in picks])
            for k in ("loss", "loss_rgb", "loss_ssim", "loss_visibility"):
                traj[k].append(vals[k])
            traj["grad_norm"].append(gn); traj["lr"].append(lr); traj["beta1"].append(beta1)
            if step + 1 == args.trajectory_steps:
                write_trajectory(args.trajectory, traj, scenes, init_state, curve.get("raster_check"))
        if step % 25 == 0:
            print(f"step {step:5d} loss {vals['loss']:.5f} (mse {vals['loss_rgb']:.5f} dssim {vals['loss_ssim']:.4f} "
                  f"vis {vals['loss_visibility']:.4f}) psnr {vals['psnr']:.2f} lr {lr:.2e} gn {gn:.4f} "
                  f"[{time.time() - t0:.0f}s wall, {curve['cpu_s'][-1]:.0f}s cpu]", flush=True)
        if (step + 1) % args.save_every == 0:
            save(step + 1)
        if args.stop_at and step + 1 >= args.stop_at:
            print(f"--stop_at: stopping after step {step + 1} of the {args.steps}-step schedule", flush=True)
            break
    save(step + 1)
    print(f"JAX rasterizer pair overflow (must be 0): {jax_raster.overflow['pairs']}")
    print(f"done: {step + 1} steps, {time.time() - t0:.0f}s wall, {time.process_time() - c0:.0f}s cpu")


def write_trajectory(path, traj, scenes, init_state, raster_check):
    """The replayed steps: each step's frames (uint8) with their world cameras and normalised intrinsics,
    the official initial state_dict and the official per-step values."""
    scene_idx, frames = np.asarray(traj["scene"]), np.asarray(traj["frames"])  # [S, B], [S, B, V]
    arrays = {
        "images": np.stack([[scenes[i].images[f] for i, f in zip(si, fi)] for si, fi in zip(scene_idx, frames)]),
        "c2w": np.stack([[scenes[i].c2w[f] for i, f in zip(si, fi)] for si, fi in zip(scene_idx, frames)]),
        "intrinsics": np.stack([[scenes[i].intrinsics[f] for i, f in zip(si, fi)]
                                for si, fi in zip(scene_idx, frames)]),
        "scene": scene_idx, "frames": frames,
        **{k: np.asarray(traj[k], np.float64) for k in ("loss", "loss_rgb", "loss_ssim", "loss_visibility",
                                                        "grad_norm", "lr", "beta1")},
        **{f"sd/{k}": v.numpy().astype(np.float32) for k, v in init_state.items()},
    }
    if raster_check:
        arrays["raster_check"] = np.array(json.dumps(raster_check))
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}: {len(traj['loss'])} steps", flush=True)


if __name__ == "__main__":
    main()
