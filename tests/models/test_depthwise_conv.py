"""`depthwise_conv2d` is the same op as `lax.conv_general_dilated(feature_group_count=C)` and as
torch's `Conv2d(C, C, k, groups=C)`, forward and both gradients, and its filter gradient compiles to
fewer XLA:CPU kernels than JAX's own; TorchConv's depthwise and 1x1 (matmul) forms match torch
(docs/performance.md, "depthwise convolutions")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from experiments.benchmarks.compile import num_kernels
from locojax.models.common.depthwise_conv import (_library_filter_grad, depthwise_conv2d,
                                                  depthwise_filter_grad)
from locojax.models.common.layers import TorchConv

# (x shape, kernel size, strides, dilation): UNet shapes of locosplat_tiny, a stride-2 downsample
# with a stride remainder (odd size), a dilated and a non-square case.
CASES = [
    ((2, 10, 10, 32), (3, 3), (1, 1), (1, 1)),
    ((2, 11, 9, 8), (3, 3), (2, 2), (1, 1)),
    ((1, 12, 13, 4), (3, 3), (1, 2), (2, 1)),
    ((3, 9, 8, 5), (2, 3), (2, 1), (1, 1)),
]


def _lax_depthwise(x, k, strides, dilation):
    return jax.lax.conv_general_dilated(x, k, strides, "VALID", rhs_dilation=dilation,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=x.shape[-1])


def _inputs(shape, khw, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    k = rng.normal(size=tuple(khw) + (1, shape[-1])).astype(np.float32)
    return x, k


@pytest.mark.parametrize("shape,khw,strides,dilation", CASES)
def test_matches_lax_and_torch(shape, khw, strides, dilation):
    x, k = _inputs(shape, khw, seed=sum(shape))

    @jax.jit
    def both(x_, k_):  # a non-linear read-out, so the output cotangent is not constant
        out = {}
        for name, fn in (("ours", depthwise_conv2d), ("lax", _lax_depthwise)):
            y_, vjp = jax.vjp(lambda a, b: fn(a, b, strides, dilation), x_, k_)
            out[name] = (y_,) + vjp(jnp.cos(y_))
        g = jnp.cos(out["lax"][0])
        return out, (_library_filter_grad(x_, g, khw, strides, dilation),
                     depthwise_filter_grad(x_, g, khw, strides, dilation))

    out, (dk_library, dk_grouped) = both(x, k)
    y, dx, dk = out["ours"]
    y_ref, dx_ref, dk_ref = out["lax"]
    assert y.shape == y_ref.shape and dk.shape == k.shape
    np.testing.assert_allclose(y, y_ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(dk, dk_ref, rtol=1e-5, atol=1e-4)

    # torch's Conv2d(groups=C) (NCHW, weight [C, 1, kh, kw]) with the same read-out
    c = shape[-1]
    xt = torch.tensor(x.transpose(0, 3, 1, 2), requires_grad=True)
    kt = torch.tensor(k[:, :, 0, :].transpose(2, 0, 1)[:, None], requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, kt, stride=strides, dilation=dilation, groups=c)
    torch.sin(yt).sum().backward()
    np.testing.assert_allclose(y, yt.detach().numpy().transpose(0, 2, 3, 1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(dx, xt.grad.numpy().transpose(0, 2, 3, 1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(dk[:, :, 0, :], kt.grad.numpy()[:, 0].transpose(1, 2, 0), rtol=1e-5, atol=1e-4)

    # the accelerator branch (JAX's own batch_group_count transpose) gives the same filter gradient
    np.testing.assert_allclose(dk_library, dk_grouped, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("features,kernel,stride,padding,mode,groups", [
    (6, 3, 2, 1, "replicate", 6),  # depthwise: depthwise_conv2d
    (5, 1, 2, 1, "zeros", 1),  # 1x1 (strided, padded): a matmul over channels
])
def test_torch_conv_special_forms_match_torch(features, kernel, stride, padding, mode, groups):
    """TorchConv's depthwise and 1x1 forms, forward and gradients, against torch.nn.Conv2d."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 9, 10, 6)).astype(np.float32)
    conv = TorchConv(features, kernel, stride, padding, padding_mode=mode, groups=groups)
    params = jax.jit(conv.init)(jax.random.PRNGKey(0), x)
    y, (dparams, dx) = jax.jit(jax.value_and_grad(
        lambda p, x_: jnp.sum(jnp.sin(conv.apply(p, x_))), (0, 1)))(params, x)
    ref = torch.nn.Conv2d(6, features, kernel, stride, padding, padding_mode=mode, groups=groups)
    with torch.no_grad():  # flax HWIO -> torch OIHW
        ref.weight.copy_(torch.tensor(np.asarray(params["params"]["kernel"]).transpose(3, 2, 0, 1)))
        ref.bias.copy_(torch.tensor(np.asarray(params["params"]["bias"])))
    xt = torch.tensor(x.transpose(0, 3, 1, 2), requires_grad=True)
    yt = torch.sin(ref(xt)).sum()
    yt.backward()
    np.testing.assert_allclose(y, yt.item(), rtol=1e-5)
    np.testing.assert_allclose(dx, xt.grad.numpy().transpose(0, 2, 3, 1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(dparams["params"]["kernel"], ref.weight.grad.numpy().transpose(2, 3, 1, 0),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dparams["params"]["bias"], ref.bias.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_filter_gradient_compiles_to_fewer_cpu_kernels():
    """JAX's own filter gradient becomes a dense C x C conv + mask + reduce on XLA:CPU (5 kernels);
    the grouped-conv form is 3 (the two layout copies and the conv)."""
    x, k = _inputs((2, 10, 10, 32), (3, 3), seed=0)

    def kernels(fn):
        grad_k = jax.jit(jax.grad(lambda k_, x_: jnp.sum(jnp.sin(fn(x_, k_, (1, 1), (1, 1))))))
        return num_kernels(grad_k.lower(k, x).compile())

    ours, theirs = kernels(depthwise_conv2d), kernels(_lax_depthwise)
    assert 0 < ours < theirs, (ours, theirs)
