"""The official GlobalSplat perceptual loss (VGG trunk with average pools + pixel L1) against torch.

torch side: torchvision's `vgg19().features` / `vgg16().features` layout in plain torch.nn (torchvision
itself may be unloadable beside CPU torch), max pools swapped for AvgPool2d(2, 2) and split into the
official blocks `features[0:4], [4:9], [9:14], [14:23], [23:32]` (VGG-16: the same named taps), random
He-initialised weights, the official error terms. The converter reads that module's own state_dict.
The official class itself (`rendering_loss.PerceptualLoss`) is checked through the side-by-side run
(tests/models/globalsplat/test_globalsplat_side_by_side.py: its perceptual term at step 0 agrees to 1e-5).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from locojax.losses import perceptual as perc  # noqa: E402

# torchvision `features` layouts: "C" conv 3x3 + ReLU (two modules), "P" pool (one module).
LAYOUTS = {"vgg19": "CCPCCPCCCCPCCCCPCCCCP", "vgg16": "CCPCCPCCCPCCCPCCCP"}
BLOCK_ENDS = {"vgg19": (4, 9, 14, 23, 32), "vgg16": (4, 9, 14, 21, 28)}


def torch_features(arch, seed=0):
    gen = np.random.default_rng(seed)
    layers, cin, channels = [], 3, iter(perc.CHANNELS[arch] + (512,) * 4)
    for op in LAYOUTS[arch]:
        if op == "P":
            layers.append(torch.nn.AvgPool2d(kernel_size=2, stride=2))  # the official max -> avg swap
            continue
        cout = next(channels)
        conv = torch.nn.Conv2d(cin, cout, 3, padding=1)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(gen.standard_normal((cout, cin, 3, 3), np.float32)
                                               * np.float32(np.sqrt(2.0 / (9 * cin)))))
            conv.bias.copy_(torch.from_numpy(gen.standard_normal(cout, np.float32) * np.float32(0.1)))
        layers += [conv, torch.nn.ReLU(inplace=False)]
        cin = cout
    return torch.nn.Sequential(*layers).eval()


def torch_perceptual(features, arch, pred, target):
    """The official PerceptualLoss.forward on [B, H, W, 3] numpy images -> (loss, d loss / d pred)."""
    mean = torch.tensor([123.6800, 116.7790, 103.9390]).reshape(1, 3, 1, 1)
    p = torch.tensor(pred.transpose(0, 3, 1, 2), requires_grad=True)
    t = torch.tensor(target.transpose(0, 3, 1, 2))
    pp, tp = p * 255.0 - mean, t * 255.0 - mean
    starts = (0,) + BLOCK_ENDS[arch][:-1]
    blocks = [features[a:b] for a, b in zip(starts, BLOCK_ENDS[arch])]
    loss = torch.mean(torch.abs(tp - pp))
    for block, c in zip(blocks, (2.6, 4.8, 3.7, 5.6, 1.5 / 10)):
        pp, tp = block(pp), block(tp)
        loss = loss + torch.mean(torch.abs(tp - pp)) / c
    loss = loss / 255.0
    loss.backward()
    return float(loss.detach()), p.grad.numpy().transpose(0, 2, 3, 1)


def images(shape, seed):
    gen = np.random.default_rng(seed)
    base = gen.random(shape, np.float32)
    return np.clip(base, 0, 1), np.clip(base + 0.2 * gen.standard_normal(shape).astype(np.float32), 0, 1)


@pytest.mark.parametrize("arch", ["vgg19", "vgg16"])
def test_perceptual_value_and_gradient_match_torch(arch):
    features = torch_features(arch)
    convs = perc.vgg_convs_from_state_dict({f"features.{k}": v for k, v in features.state_dict().items()}, arch)
    pred, target = images((2, 36, 40, 3), seed=1)  # odd sizes after the 3rd pool: floors like torch
    ref, ref_grad = torch_perceptual(features, arch, pred, target)
    # Eager: under jit XLA fuses the backward pass's trunk differently (features differ by ~1e-7
    # relative), and an L1 whose arguments nearly tie can then flip one sign (a 1e-2 gradient change).
    loss, grad = jax.value_and_grad(lambda p: perc.vgg_perceptual(p, jnp.asarray(target), convs,
                                                                   arch=arch))(jnp.asarray(pred))
    assert ref > 1.2 * np.abs(pred - target).mean()  # the feature terms matter: a real check of the trunk
    np.testing.assert_allclose(float(loss), ref, rtol=2e-6)
    np.testing.assert_allclose(np.asarray(grad), ref_grad, rtol=1e-4, atol=1e-5 * np.abs(ref_grad).max())


def test_leading_axes_and_pixel_term():
    convs = perc.vgg_convs_from_state_dict(torch_features("vgg16").state_dict(), "vgg16")  # `features` keys
    pred, target = images((2, 3, 16, 16, 3), seed=2)
    flat = perc.vgg_perceptual(pred.reshape(6, 16, 16, 3), target.reshape(6, 16, 16, 3), convs, arch="vgg16")
    np.testing.assert_allclose(perc.vgg_perceptual(pred, target, convs, arch="vgg16"), flat, rtol=1e-6)
    for step in (1, 4):  # a lax.map over pairs (the CPU default at >= 128 px) gives the same value
        np.testing.assert_allclose(perc.vgg_perceptual(pred, target, convs, arch="vgg16", pairs_per_step=step),
                                   flat, rtol=1e-6)
    np.testing.assert_allclose(perc.pixel_l1(pred, target), np.abs(pred - target).mean(), rtol=1e-6)
    assert float(perc.vgg_perceptual(target, target, convs, arch="vgg16")) == 0.0


def test_converter_names_the_problem(tmp_path):
    state = {f"features.{k}": v for k, v in torch_features("vgg16").state_dict().items()}
    with pytest.raises(ValueError, match=r"not a torchvision vgg19 state_dict \(missing features.16.weight"):
        perc.vgg_convs_from_state_dict(state, "vgg19", source="vgg16.pth")  # a VGG-16 file is too short
    bad = dict(state, **{"features.0.weight": np.zeros((64, 3, 5, 5), np.float32)})
    with pytest.raises(ValueError, match=r"vgg16.pth.*features.0.weight \(64, 3, 5, 5\)"):
        perc.vgg_convs_from_state_dict(bad, "vgg16", source="vgg16.pth")
    with pytest.raises(ValueError, match="not part of a torchvision vgg16.*encoder.w"):
        perc.vgg_convs_from_state_dict(dict(state, **{"encoder.w": np.zeros(3)}), "vgg16", source="x")
    path = tmp_path / "vgg16.pth"
    torch.save(state, path)
    convs = perc.vgg_convs_from_file(str(path), "vgg16")
    np.testing.assert_array_equal(convs[3][0], state["features.7.weight"].numpy().transpose(2, 3, 1, 0))
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        perc.vgg_convs_from_file(str(tmp_path / "missing.pth"))
