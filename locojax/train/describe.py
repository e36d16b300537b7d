"""What a config builds, at abstract shapes only (`python -m experiments.describe`): parameter counts
(total, trainable, per top-level module, per optimizer group), Gaussians per scene, and the FLOPs of
one forward pass and one training step (XLA's cost analysis, loop-corrected: `locojax.train.flops`).

Nothing is allocated: the parameters and optimizer state come from `jax.eval_shape`, the batch is
`run.placeholder_batch` as ShapeDtypeStructs, and the functions are traced and lowered, never compiled.
"""

from __future__ import annotations

import time
from collections import defaultdict

import jax
import numpy as np

from locojax.train.flops import count_flops
from locojax.train.run import build_run, placeholder_batch, run_train_step
from locojax.train.state import count_params


def _size(x) -> int:
    return int(np.prod(x.shape))


def _abstract(tree):
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype)
                                  if not isinstance(x, jax.ShapeDtypeStruct) else x, tree)


def describe(config, *, flops: bool = True) -> dict:
    """{num_params (the model's: all but loss networks), num_trainable_params, num_frozen_params (of the
    model), num_loss_network_params, num_params_in_state, params_per_module, params_per_group,
    params_per_part (when the model has `param_parts(params)`, e.g. LoCoSplat's W / g / h),
    num_gaussians, batch_size, flops_forward (one scene), flops_train_step (the config's global
    batch), flops_*_xla (XLA's uncorrected counts), while_loops_counted_once, seconds}."""
    t0 = time.perf_counter()
    run = build_run(config, placeholder_batch(config))
    params = run.abstract_state.params
    frozen = set(config.optimizer.frozen_groups)
    loss_keys = set(getattr(run.model, "loss_network_keys", ()))
    per_module, per_group = defaultdict(int), defaultdict(int)
    count = defaultdict(int)
    for (path, leaf), label in zip(jax.tree_util.tree_leaves_with_path(params),
                                   jax.tree_util.tree_leaves(run.labels)):
        module = str(getattr(path[0], "key", path[0]))
        per_module[module] += _size(leaf)
        per_group[str(label)] += _size(leaf)
        if module in loss_keys:
            count["loss"] += _size(leaf)
        else:
            count["model"] += _size(leaf)
            count["frozen" if label in frozen else "trainable"] += _size(leaf)
    out = dict(
        model_family=str(config.model_family),
        # the model's own parameters; a loss network's (GlobalSplat's LPIPS-VGG) are counted apart
        num_params=count["model"],
        num_trainable_params=count["trainable"],
        num_frozen_params=count["frozen"],
        num_loss_network_params=count["loss"],
        num_params_in_state=count_params(params),
        params_per_module=dict(sorted(per_module.items())),
        params_per_group=dict(sorted(per_group.items())),
        num_gaussians=int(run.model.num_gaussians),
        batch_size=int(config.batch_size),
        num_context_views=int(config.data.num_context_views),
        num_target_views=int(config.data.num_target_views),
        image_shape=[int(s) for s in config.data.image_shape],
    )
    parts = getattr(run.model, "param_parts", None)  # a family's named parts (LoCoSplat: W, g, h, ...)
    if parts is not None:
        out["params_per_part"] = {k: int(v) for k, v in parts(params).items()}
    if flops:
        out.update(_flops(config, run))
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _flops(config, run) -> dict:
    model = run.model
    context = _abstract(placeholder_batch(config, local_batch_size=1).context)
    rng = jax.ShapeDtypeStruct((2,), np.uint32)

    def forward(params, context, rng):
        # evaluation's forward pass at full capacity (the curriculum's last stage)
        step = np.int32(int(config.total_steps))
        return model.predict(params, context, step=step, train=False, rng=rng)

    fwd = count_flops(forward, run.abstract_state.params, context, rng)
    train = count_flops(run_train_step(run), run.abstract_state, _abstract(run.example_batch))
    return dict(flops_forward=fwd.flops, flops_train_step=train.flops,
                flops_forward_xla=fwd.xla_flops, flops_train_step_xla=train.xla_flops,
                scans_corrected=fwd.scans + train.scans,
                while_loops_counted_once=fwd.while_loops + train.while_loops)


def format_description(d: dict, name: str = "") -> str:
    def n(x):
        return f"{int(x):,}"

    lines = [f"{name or d['model_family']}: {d['model_family']} model, "
             f"{n(d['num_gaussians'])} Gaussians per scene",
             f"  parameters: {n(d['num_params'])} total, {n(d['num_trainable_params'])} trainable, "
             f"{n(d['num_frozen_params'])} frozen"
             + (f" (+ {n(d['num_loss_network_params'])} of a frozen loss network)"
                if d["num_loss_network_params"] else ""),
             "  per top-level module: " + ", ".join(f"{k} {n(v)}" for k, v in d["params_per_module"].items()),
             "  per optimizer group: " + ", ".join(f"{k} {n(v)}" for k, v in d["params_per_group"].items())]
    if d.get("params_per_part"):
        lines.append("  per part: " + ", ".join(f"{k} {n(v)}" for k, v in d["params_per_part"].items()))
    if "flops_forward" in d:
        h, w = d["image_shape"]
        lines.append(f"  forward (1 scene, {d['num_context_views']} context views {h}x{w}): "
                     f"{d['flops_forward'] / 1e9:,.2f} GFLOPs")
        lines.append(f"  training step (batch {d['batch_size']}, {d['num_context_views']}+"
                     f"{d['num_target_views']} views): {d['flops_train_step'] / 1e12:,.3f} TFLOPs")
        note = (f"  (XLA cost analysis, {d['scans_corrected']} scan loops corrected by their trip counts")
        if d["while_loops_counted_once"]:
            note += (f"; {d['while_loops_counted_once']} data-dependent while loops (rasteriser) counted"
                     " once: the training step is a lower bound")
        lines.append(note + ")")
    lines.append(f"  ({d['seconds']:.1f} s, abstract shapes only)")
    return "\n".join(lines)
