"""GlobalSplat presets (paper 001, Table 6; official `config/model/globalsplat.yaml`).

    globalsplat_16k   2048 latents x 8 Gaussians = 16,384 (the paper's main model, 84.3M params)
    globalsplat_32k   4096 latents x 8 = 32,768 (the better of Table 4's two 32K rows)
    globalsplat_2k    2048 latents x 1 (2 candidates per token, as the official 2K model)
    globalsplat_tiny  64 latents x 4, narrow widths, 64x64 images: tests and the CPU quickstart

Table 4's other rows are two values away: `model.num_latents=256` (256 x 8) and
`model.gaussians_per_token=16` (2048 x 16; uses the 4th stage boundary). Table 5's ablations are
one value each: `model.single_stream=True` (use with the preset `16k_single_stream`, which also
widens the latents to keep the parameter count comparable), `model.camera_code=False` (Plücker
only), `loss.consistency=False`, `model.curriculum=False` (direct full-capacity prediction).
Presets with those switches: `16k_single_stream`, `16k_plucker_only`, `16k_no_consistency`,
`16k_direct`.

`model.dtype` follows the top-level `precision` and `model.remat` the top-level `remat` (field
references) unless set explicitly.
"""

from __future__ import annotations

import ml_collections

PRESETS = ("16k", "32k", "2k", "tiny", "16k_single_stream", "16k_plucker_only",
           "16k_no_consistency", "16k_direct")


def _base():
    try:
        from configs.common import base_config
    except ImportError:  # pragma: no cover - the shared base is in the tree
        base_config = None
    if base_config is not None:
        return base_config()
    config = ml_collections.ConfigDict(dict(total_steps=1000, batch_size=1, log_every=10, eval_every=500,
                                            checkpoint_every=500, seed=0, dataset="synthetic",
                                            precision="float32", remat=False))
    config.data = ml_collections.ConfigDict()
    config.optimizer = ml_collections.ConfigDict()
    return config


def model_config(config) -> ml_collections.ConfigDict:
    """All of GlobalSplat's architecture hyper-parameters (Table 6 = the 16k values)."""
    return ml_collections.ConfigDict(dict(
        num_latents=2048,          # M latent scene tokens
        dim_latents=512,           # d
        dim_rgb=512,               # RGB token width
        dim_rays=256,              # Plücker / camera token width (eq. 6)
        patch_size=8,
        rounds=4,                  # B encoder blocks
        self_attention_per_round=2,  # L
        num_heads=8,
        num_candidates=16,         # K_s candidates per token
        gaussians_per_token=8,     # 2^final_stage
        sh_degree=3,
        mean_offset=(0.0, 0.0, 1.5),
        log_scale_offset=-2.0,
        scale_max=0.05,            # s_max of eq. 46 (canonical units); clamp at s_max * e^2
        opacity_offset=-5.0,
        single_stream=False,       # Table 5 "single-stream"
        camera_code=True,          # False: Table 5 "Plücker only"
        curriculum=True,           # False: Table 5 "direct full-capacity prediction"
        # Stage s starts at boundaries[s-1] (eq. 35 table); the 4th value (ours) only matters for
        # gaussians_per_token=16.
        stage_boundaries=(10_000, 20_000, 50_000, 80_000),
        stage_ramp_steps=2_000,
        gate_tau=1.0,
        eval_full_capacity=True,   # evaluation (train=False) decodes the final stage
        # "context": the model canonicalises the context cameras itself (eqs. 3-5) and returns the
        # Gaussians in the input frame (works whether or not the data pipeline normalised the scene);
        # "none": trust the data to be in GlobalSplat's canonical frame (the official setup).
        normalize_scene="context",
        attention_impl="xla",      # "cudnn": fused flash attention on NVIDIA GPUs (bf16)
        # Queries per attention chunk on the XLA path (exact; bounds the [B, H, chunk, tokens]
        # logits, which unchunked are 1.08 GB per cross-attention at 16k); 0/None: unchunked.
        # Ignored by attention_impl="cudnn" (its fused kernel never materialises the logits).
        attention_query_chunk=256,
        dtype=config.get_ref("precision"),
        remat=config.get_ref("remat"),
    ))


def loss_config() -> ml_collections.ConfigDict:
    """Table 6 / appendix 0.B.3 weights."""
    return ml_collections.ConfigDict(dict(
        mse_weight=2.0, lpips_weight=1.0,
        frustum_weight=1e-2, frustum_tau=10.0, frustum_max_depth=100.0,
        decoder_weight=1e-2, opacity_weight=1e-2, alpha_max=0.2,
        consistency=True, consistency_alpha_weight=1e-3, consistency_depth_weight=1e-2,
        consistency_support=1e-2,
    ))


def _paper_training(config):
    config.total_steps = 220_000
    config.batch_size = 16
    config.log_every = 100
    config.eval_every = 10_000
    config.checkpoint_every = 5_000
    opt = config.optimizer
    opt.learning_rate = 5e-4
    opt.weight_decay = 1e-6
    opt.grad_clip_norm = 1.0
    opt.schedule = "warmup_cosine"
    opt.warmup_steps = int(0.03 * config.total_steps)  # official warmup_pct = 0.03
    opt.final_lr_fraction = 1.0 / 50.0  # official min_lr_ratio
    # Official: decay only >= 2-D weight matrices; not norms, biases, LayerScale gains, token banks.
    opt.no_weight_decay = ("bias", "scale", "gamma", "scene_tokens", "aux_query_tokens", "slot_regs",
                           "mem_regs")
    data = config.data
    data.sampler = "globalsplat"
    data.image_shape = (256, 256)
    data.num_context_views = 13
    data.num_target_views = 12
    data.augment = True
    config.render.eps2d = 0.05 if "render" in config else None  # official render_static_batched


def get_config(preset: str = "16k") -> ml_collections.ConfigDict:
    if preset not in PRESETS:
        raise ValueError(f"Unknown GlobalSplat preset {preset!r}; valid: {', '.join(PRESETS)}")
    config = _base()
    config.model_family = "globalsplat"
    config.model = model_config(config)
    config.loss = loss_config()
    _paper_training(config)
    m = config.model
    if preset == "32k":
        m.num_latents = 4096
    elif preset == "2k":
        m.num_candidates = 2  # official re10k_2k: M_max = 2, final stage 0
        m.gaussians_per_token = 1
    elif preset == "16k_single_stream":
        m.single_stream = True
        m.dim_latents = 776  # 90.0M params vs 84.3M dual-stream (paper: 90M vs 83.4M)
    elif preset == "16k_plucker_only":
        m.camera_code = False
    elif preset == "16k_no_consistency":
        config.loss.consistency = False
    elif preset == "16k_direct":
        m.curriculum = False
    elif preset == "tiny":
        _tiny(config)
    return config


def _tiny(config):
    """A few hundred thousand parameters; trains on the synthetic data on a 2-core CPU."""
    m = config.model
    m.num_latents = 64
    m.dim_latents = 64
    m.dim_rgb = 64
    m.dim_rays = 32
    m.num_heads = 4
    m.rounds = 2
    m.self_attention_per_round = 1
    m.gaussians_per_token = 4
    m.attention_query_chunk = 0  # 72 slots x 388 memory tokens: the logits are small, chunks only cost
    m.stage_boundaries = (150, 300, 600)
    m.stage_ramp_steps = 50
    config.loss.lpips_weight = 0.0  # LPIPS-VGG dominates a CPU step at this size; MSE only
    config.total_steps = 1000  # ~5 steps/s on an idle 2-core CPU: ~4.6 min for the quickstart
    config.batch_size = 2
    config.log_every = 25
    config.eval_every = 500
    config.checkpoint_every = 500
    opt = config.optimizer
    opt.learning_rate = 1e-3
    opt.warmup_steps = 50
    data = config.data
    data.image_shape = (64, 64)
    data.num_context_views = 6
    data.num_target_views = 4
    data.augment = False
    if "synthetic_num_train_scenes" in data:  # a small embedded dataset that builds in < 1 min
        data.synthetic_num_train_scenes = 16
        data.synthetic_num_test_scenes = 4
        data.synthetic_image_size = 64
