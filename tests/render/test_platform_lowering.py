"""Lowering-time platform choices (issue 22, item 6): a module exported for cuda from this CPU host
carries the accelerator paths (no per-pair `lax.map`, no Winograd trunk) and full-precision float32
matmuls in the renderer; lowered for CPU it keeps the CPU paths. Numerics on CPU are unchanged
(covered by the existing metric, loss and rasterizer tests)."""

import jax
import jax.numpy as jnp
import pytest

from locojax.losses.perceptual import CHANNELS, vgg_perceptual
from locojax.metrics.lpips import lpips_with_params
from locojax.render import rasterize_batch
from locojax.types import Camera, Gaussians

spec = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
LPIPS_CHANNELS = (64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512)
LPIPS_TAPS = (64, 128, 256, 512, 512)


def _convs(channels):
    cin = (3,) + tuple(channels[:-1])
    return [(spec(3, 3, i, o), spec(o)) for i, o in zip(cin, channels)]


def _texts(fn, *args):
    """(StableHLO exported for cuda, StableHLO lowered for cpu) of jit(fn) at abstract args."""
    cuda = jax.export.export(jax.jit(fn), platforms=("cuda",))(*args).mlir_module()
    cpu = jax.export.export(jax.jit(fn), platforms=("cpu",))(*args).mlir_module()
    return cuda, cpu


def test_lpips_export_for_cuda_has_the_gpu_path():
    params = {"convs": _convs(LPIPS_CHANNELS), "heads": [spec(c) for c in LPIPS_TAPS]}
    imgs = spec(3, 128, 128, 3)
    cuda, cpu = _texts(jax.grad(lambda p, a, b: jnp.sum(lpips_with_params(p, a, b)), argnums=1), params, imgs, imgs)
    # CPU: a lax.map over single pairs and Winograd blocks 3-5 (dot_generals with the 6x6 tiles' filters);
    # cuda: one batched pass of plain convolutions.
    assert "stablehlo.while" in cpu and "stablehlo.while" not in cuda
    assert cuda.count("stablehlo.convolution") > cpu.count("stablehlo.convolution")
    # Winograd products: dot_generals with a filter bank [(4 + 2)^2, Cin, Cout] (the cuda module only
    # zero-fills the unused branch's residuals of that shape, which XLA removes as dead code).
    winograd = lambda text: [l for l in text.splitlines() if "dot_general" in l and "tensor<36x" in l]  # noqa: E731
    assert winograd(cpu) and not winograd(cuda)


def test_perceptual_loss_export_for_cuda_is_batched():
    convs = _convs(CHANNELS["vgg19"])
    imgs = spec(2, 128, 128, 3)
    cuda, cpu = _texts(jax.grad(lambda a, b, c: vgg_perceptual(a, b, c)), imgs, imgs, convs)
    assert "stablehlo.while" in cpu and "stablehlo.while" not in cuda


def test_rasterizer_matmuls_are_full_precision_for_cuda():
    s, v, n = 1, 2, 512
    g = Gaussians(means=spec(s, n, 3), quats=spec(s, n, 4), scales=spec(s, n, 3), opacities=spec(s, n),
                  sh=spec(s, n, 16, 3))
    cams = Camera(viewmat=spec(s, v, 4, 4), K=spec(s, v, 3, 3))

    def loss(g, c):
        out = rasterize_batch(g, c, width=32, height=32, sh_degree=3, backend="xla")  # cuda: static trip count
        return jnp.sum(out.rgb) + jnp.sum(out.depth)

    cuda = jax.export.export(jax.jit(jax.grad(loss)), platforms=("cuda",))(g, cams).mlir_module()
    dots = [line for line in cuda.splitlines() if "stablehlo.dot_general" in line]
    assert len(dots) >= 8  # projection, SH, the compositing backward's moments, and their transposes
    loose = [d for d in dots if "precision = [HIGHEST, HIGHEST]" not in d]
    assert not loose, loose[:3]


@pytest.mark.parametrize("fn", ["pixel_rays", "cameras_from_views"])
def test_camera_matmuls_are_full_precision(fn):
    from locojax.geometry import cameras

    if fn == "pixel_rays":
        f = lambda c2w, k: cameras.pixel_rays(c2w, k, 8, 8)  # noqa: E731
    else:
        f = lambda c2w, k: cameras.w2c_to_c2w(c2w)  # noqa: E731
    text = jax.jit(f).lower(spec(2, 4, 4), spec(2, 3, 3)).as_text()
    dots = [line for line in text.splitlines() if "dot_general" in line]
    assert dots and all("HIGHEST" in d for d in dots)


def test_flop_count_follows_the_lowered_platform_branch():
    """`describe`'s loop-corrected FLOPs count only the branch a platform_dependent keeps (a scan in
    another platform's branch is not in the lowered module)."""
    from locojax.train.flops import count_flops

    x = spec(4, 8)
    here = lambda x: jnp.sum(jnp.sin(x))  # noqa: E731
    mapped = lambda x: jnp.sum(jax.lax.map(lambda r: jnp.sum(jnp.sin(r)), x))  # noqa: E731
    both = lambda x: jax.lax.platform_dependent(x, cpu=here, default=mapped)  # noqa: E731
    got, want = count_flops(both, x), count_flops(here, x)
    assert got.flops == want.flops and got.scans == 0
    assert count_flops(mapped, x).scans == 1
