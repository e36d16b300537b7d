"""Every LoCoSplat ablation is one config value (parsed as on the command line) that builds and runs
at 32 px: Table 12's grid levels (1, 2, 4, 8, 12, doubling from 0.001), C.1's "no fusion MLP",
Table 5's D in {32, 64, 128, 256} and trilinear fine level. The whole model is traced at abstract
shapes (build, init, evaluation forward with the Table 13 diagnostics: compiling the full network
takes minutes on the shared CPU); the 3D stage and head, which these ablations change, run for real.
`experiments.describe` reports g growing by 16 x 256 parameters per extra level."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import configs
from locojax.models.locosplat.anchors import build_anchors
from locojax.models.locosplat.stage3d import LocalContext, PointwiseHead
from locojax.models.registry import build_model
from locojax.train.run import placeholder_batch


def doubling(levels: int) -> str:
    return ",".join(repr(0.001 * 2 ** i) for i in range(levels))


LEVELS = {1: "0.001", 2: "0.001,0.128", 4: doubling(4), 8: doubling(8), 12: doubling(12)}
VARIANTS = ([f"model.grid_cell_sizes={v}" for v in LEVELS.values()] + ["model.fusion=False"]
            + [f"model.depth.num_candidates={d}" for d in (32, 64, 128, 256)] + ["model.fine_level_interp=trilinear"])
DIAGS = {"scale0_entropy", "scale0_w90", "scale0_modal_share", "delta_u_px", "mv_depth_rel_err"}


def _g_params(levels: int, c: int, proj: int = 16, hidden: int = 256) -> int:
    """g: (levels * proj + C) -> hidden -> hidden -> C, with biases (141,956 at C = 132, 2 levels)."""
    return (levels * proj + c) * hidden + hidden + hidden * hidden + hidden + hidden * c + c


def _run_stage(cfg):
    """The 3D stage + head of `cfg`, with random parameters, on a real cloud: finite, f' has f's width.
    Returns (f' [1, n, C], the anchors' mean features f_a [1, n, C])."""
    rng = np.random.default_rng(0)
    n, c = 128, cfg.feature_dim
    x = (rng.integers(-30, 30, (1, n, 3)) * 0.001 + rng.uniform(-4e-4, 4e-4, (1, n, 3))).astype(np.float32)
    f = rng.normal(size=(1, n, c)).astype(np.float32)
    stage = LocalContext(tuple(cfg.grid_cell_sizes), cfg.proj_dim, cfg.fusion_hidden, cfg.fusion, cfg.activation,
                         cfg.fine_level_interp)
    head = PointwiseHead(cfg.head_hidden, cfg.raw_dim, cfg.activation)
    a = jax.eval_shape(lambda x, f: build_anchors(x, f, cfg.voxel_size), x, f)
    shapes = {"stage": jax.eval_shape(stage.init, jax.random.PRNGKey(0), a, x, f),
              "head": jax.eval_shape(head.init, jax.random.PRNGKey(1), jnp.zeros((1, n, c)))}
    params = jax.tree_util.tree_map(lambda s: (0.1 * rng.normal(size=s.shape)).astype(np.float32), shapes)

    @jax.jit
    def run(params, x, f):
        a = build_anchors(x, f, cfg.voxel_size)
        fp, ov = stage.apply(params["stage"], a, x, f)
        return fp, head.apply(params["head"], fp), ov, a.features

    fp, raw, ov, anchor_features = run(params, x, f)
    assert fp.shape == (1, n, c) and raw.shape == (1, n, 38) and int(ov[0]) == 0
    assert np.all(np.isfinite(np.asarray(raw)))
    return np.asarray(fp), np.asarray(anchor_features)


@pytest.mark.parametrize("override", VARIANTS)
def test_ablation_builds_and_runs_at_32px(override):
    config = configs.get_config("locosplat_tiny")
    configs.apply_overrides(config, ["data.image_shape=32,32", override])
    model = build_model(config)
    cfg = model.cfg
    batch = placeholder_batch(config, local_batch_size=1)
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0), batch)  # traces the whole forward
    parts = model.param_parts(params)
    c, levels = cfg.feature_dim, len(cfg.grid_cell_sizes)
    if override.startswith("model.grid_cell_sizes"):
        assert levels in LEVELS and cfg.grid_cell_sizes[0] == 0.001
        assert all(b == pytest.approx(2 * a) for a, b in zip(cfg.grid_cell_sizes[1:-1], cfg.grid_cell_sizes[2:]))
        assert parts["g"] == _g_params(levels, c) and parts["W"] == levels * (c * 16 + 16)
        if levels == 12:  # 4 and 8 levels run the same code with fewer grids; 2 levels: test_anchors_stage3d
            _run_stage(cfg)
    elif override == "model.fusion=False":
        assert parts["g"] == 0 and parts["W"] == 0
        fp, f_anchor = _run_stage(cfg)
        np.testing.assert_array_equal(fp, f_anchor)  # f' = f_a: no projections, no g
    elif "num_candidates" in override:
        depth_cands = cfg.depth.num_candidates
        assert depth_cands == int(override.split("=")[1])
        heads = [leaf.shape for path, leaf in jax.tree_util.tree_leaves_with_path(params["net"]["depth"])
                 if "regressor" in jax.tree_util.keystr(path) and leaf.ndim == 4]
        assert (3, 3, 2 * cfg.depth.unet_channels, depth_cands) in heads  # scale-0 depth head: 2C -> D
        if depth_cands == 64:  # the paper's D: the evaluation forward with Table 13's diagnostics
            pred = jax.eval_shape(lambda p, c: model.predict(p, c, train=False), params, batch.context)
            assert pred.gaussians.means.shape == (1, 2 * 32 * 32, 3)
            assert {k[5:] for k in pred.aux if k.startswith("diag/")} >= DIAGS
            assert all(v.shape == (1,) for k, v in pred.aux.items() if k.startswith("diag/"))
    else:
        assert cfg.fine_level_interp == "trilinear" and parts["W"] == levels * (c * 16 + 16)
        _run_stage(cfg)


def test_describe_reports_g_growing_16x256_per_level(capsys):
    """At the paper's widths (C = 132): 141,956 for two levels, + 16 x 256 per extra level."""
    from experiments import describe as describe_cli

    assert describe_cli.main(["--config=locosplat_6v", f"--config.model.grid_cell_sizes={LEVELS[12]}",
                              "--json", "--noflops"]) == 0
    parts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["params_per_part"]
    assert _g_params(2, 132) == 141_956 and parts["g"] == 141_956 + 10 * 16 * 256
    assert parts["W"] == 4_256 + 10 * (132 * 16 + 16) and parts["h"] == 6_460
