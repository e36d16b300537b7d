"""The compositing backend is chosen when a computation is lowered, for the platform it is lowered
for (`jax.lax.platform_dependent`), so modules exported on this CPU for cuda / tpu carry the
accelerator's choice; and every family's tiny training step and the full-size rasterizer lower
for cuda and tpu (lowering only: nothing here compiles for or runs on a device)."""

import jax
import jax.numpy as jnp
import pytest
from jax import export

from locojax.render import rasterize, rasterize_batch
from locojax.types import Camera, Gaussians

# Pallas Triton's custom call (jaxlib 0.10.2) and its successor (newer jaxlibs): not in export's
# list of stable custom calls, so the check is disabled for exactly these names.
TRITON_CALLS = ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi")
DISABLED = [export.DisabledSafetyCheck.custom_call(name) for name in TRITON_CALLS]
TINY_PRESETS = ("globalsplat_tiny", "locosplat_tiny", "locusgs_tiny", "tokengs_tiny")


def _abstract_gaussians(s, n, sh_degree):
    f = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    return Gaussians(means=f(s, n, 3), quats=f(s, n, 4), scales=f(s, n, 3), opacities=f(s, n),
                     sh=f(s, n, (sh_degree + 1) ** 2, 3))


def _abstract_cameras(s, v):
    return Camera(viewmat=jax.ShapeDtypeStruct((s, v, 4, 4), jnp.float32),
                  K=jax.ShapeDtypeStruct((s, v, 3, 3), jnp.float32))


def _render_fns(backend, *, width, height, sh_degree):
    """(forward, value_and_grad) of a rendering loss, jitted."""
    def loss(g, cams):
        out = rasterize_batch(g, cams, width=width, height=height, sh_degree=sh_degree, backend=backend)
        return jnp.sum(out.rgb) + jnp.sum(out.depth) + jnp.sum(out.alpha)

    forward = jax.jit(lambda g, cams: rasterize_batch(g, cams, width=width, height=height, sh_degree=sh_degree,
                                                      backend=backend))
    return forward, jax.jit(jax.value_and_grad(loss))


def _export_per_platform(jitted, args, platforms):
    """{platform: Exported}, one single-platform export each (the Triton pallas_call has no TPU
    lowering, so one multi-platform module cannot hold both), sharing one trace where this jax's
    export internals allow (tracing a train step costs more than lowering it)."""
    try:
        from jax._src.export._export import _export_lowered
        from jax._src.interpreters import mlir

        traced = jitted.trace(*args)
        params = mlir.LoweringParameters(for_export=True, hoist_constants_as_args=False)
        lower = lambda p: _export_lowered(traced.lower(lowering_platforms=(p,), _private_parameters=params),
                                          traced.jaxpr, traced.fun_name, disabled_checks=DISABLED)
    except (ImportError, AttributeError, TypeError):  # other jax versions: the public API per platform
        lower = lambda p: export.export(jitted, platforms=(p,), disabled_checks=DISABLED)(*args)
    return {p: lower(p) for p in platforms}


def _has_triton(exported):
    text = exported.mlir_module()
    return any(name in text for name in TRITON_CALLS)


def _has_mosaic(exported):
    return "tpu_custom_call" in exported.mlir_module()


def test_export_carries_the_platforms_backend():
    args = (_abstract_gaussians(1, 64, 0), _abstract_cameras(1, 2))
    forward, grad = _render_fns("auto", width=32, height=24, sh_degree=0)
    for fn in (forward, grad):
        out = _export_per_platform(fn, args, ("cuda", "cpu", "tpu"))
        assert _has_triton(out["cuda"])  # auto on cuda: the Triton kernels
        assert _has_mosaic(out["tpu"]) and not _has_triton(out["tpu"])  # auto on tpu: the Mosaic kernels
        assert not _has_triton(out["cpu"]) and not _has_mosaic(out["cpu"])  # XLA compositing
    xla_fwd, _ = _render_fns("xla", width=32, height=24, sh_degree=0)
    out = _export_per_platform(xla_fwd, args, ("cuda", "tpu"))
    assert not _has_triton(out["cuda"]) and not _has_mosaic(out["tpu"])
    pallas_fwd, _ = _render_fns("pallas", width=32, height=24, sh_degree=0)
    out = _export_per_platform(pallas_fwd, args, ("cuda", "cpu", "tpu"))
    assert _has_triton(out["cuda"]) and not _has_triton(out["cpu"])  # cpu: interpreted, plain HLO
    assert _has_mosaic(out["tpu"])


def test_unknown_backend_is_named():
    g = Gaussians(means=jnp.zeros((1, 3)), quats=jnp.ones((1, 4)), scales=jnp.ones((1, 3)),
                  opacities=jnp.ones(1), sh=jnp.zeros((1, 1, 3)))
    cam = Camera(viewmat=jnp.eye(4), K=jnp.eye(3))
    with pytest.raises(ValueError, match="backend='triton'.*'auto', 'xla', 'pallas'"):
        rasterize(g, cam, width=8, height=8, sh_degree=0, backend="triton")


def test_render_config_backends():
    import configs
    from locojax.render.factory import make_render_fn

    config = configs.get_config("globalsplat_tiny")
    assert config.render.backend == "auto"
    for name in ("auto", "xla", "pallas", "tile", "dense"):
        config.render.backend = name
        assert callable(make_render_fn(config.render, sh_degree=0))
    config.render.backend = "cuda"
    with pytest.raises(ValueError, match="config.render.backend='cuda'"):
        make_render_fn(config.render, sh_degree=0)


def _train_step_and_specs(name):
    """A preset's jitted train step and its abstract (state, batch), as `locojax.train.aot`."""
    import configs
    from locojax.train import sharding as shd
    from locojax.train.checkpoint import abstract_with_shardings
    from locojax.train.run import build_run, placeholder_batch
    from locojax.train.step import jit_train_step, make_train_step

    config = configs.get_config(name)
    run = build_run(config, placeholder_batch(config))
    state = abstract_with_shardings(run.abstract_state, run.state_shardings)
    bsh = shd.batch_sharding(run.mesh)
    batch = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=bsh),
                                   run.example_batch)
    step = jit_train_step(make_train_step(run.model, run.tx, run.schedule, run.render), run.state_shardings, bsh,
                          shd.replicated(run.mesh))
    return step, (state, batch)


@pytest.mark.long_running
def test_everything_lowers_for_cuda_and_tpu():
    """Issue 22 item 3: the four tiny training steps, and the rasterizer forward and value_and_grad
    at 393,216 Gaussians x 8 views at 256 x 256 (abstract shapes, nothing allocated), export for
    cuda and tpu with backend "auto" (cuda: Triton kernels; tpu: Mosaic kernels)."""
    failures = []
    for name in TINY_PRESETS:
        try:
            step, specs = _train_step_and_specs(name)
            out = _export_per_platform(step, specs, ("cuda", "tpu"))
            assert _has_triton(out["cuda"]), f"{name}: the cuda step does not use the Triton kernels"
            assert _has_mosaic(out["tpu"]), f"{name}: the tpu step does not use the Mosaic kernels"
        except Exception as e:  # noqa: BLE001 - collect every family's failure, then fail once
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:2000]}")
    args = (_abstract_gaussians(1, 393_216, 3), _abstract_cameras(1, 8))
    for kind, fn in zip(("forward", "value_and_grad"), _render_fns("auto", width=256, height=256, sh_degree=3)):
        try:
            out = _export_per_platform(fn, args, ("cuda", "tpu"))
            assert _has_triton(out["cuda"]) and _has_mosaic(out["tpu"])
        except Exception as e:  # noqa: BLE001
            failures.append(f"rasterizer {kind}: {type(e).__name__}: {str(e)[:2000]}")
    assert not failures, "\n".join(failures)


def test_flop_count_follows_the_lowered_platform_branch():
    # count_flops corrects only the platform_dependent branch that the analysed (cpu) lowering keeps:
    # "auto" costs what "xla" does on cpu (the accelerator branches' static scans are not added).
    from locojax.train.flops import count_flops

    args = (_abstract_gaussians(1, 256, 0), _abstract_cameras(1, 2))
    counts = {}
    for backend in ("auto", "xla"):
        fn = lambda g, c, b=backend: jnp.sum(rasterize_batch(g, c, width=32, height=32, sh_degree=0, backend=b).rgb)
        counts[backend] = count_flops(fn, *args)
    assert counts["auto"] == counts["xla"] and counts["auto"].while_loops == 1
