"""Input preparation (paper sec. 3.2.2): views -> patch tokens [B, V, P, dim_rays + dim_rgb].

For each view: the image, normalised with the ImageNet mean/std (official code), is cut into
p x p patches and mapped linearly (no bias) to `dim_rgb` (the RGB tokens); dense Plücker rays are
cut the same way and mapped linearly (no bias) to `dim_rays` (eq. 6); the per-view camera code is
added to every ray token (eq. 8); tokens = [camera; RGB] (eq. 9).

Layouts follow the official code so converted weights apply unchanged: a patch is flattened as
(row-in-patch, column-in-patch, channel) and the ray channels are (o x d, d) - moment first,
unlike `locojax.geometry.cameras.plucker_rays` which is (d, o x d).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from locojax.geometry.cameras import pixel_rays
from locojax.models.common.layers import TORCH_DEFAULT_INIT, dense
from locojax.models.globalsplat.camera_code import CameraCode

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def patchify(x, patch: int):
    """[B, V, H, W, C] -> [B, V, (H/p)(W/p), p*p*C], patches row-major, (py, px, c) inside a patch."""
    b, v, h, w, c = x.shape
    if h % patch or w % patch:
        raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {patch}")
    x = x.reshape(b, v, h // patch, patch, w // patch, patch, c)
    x = x.transpose(0, 1, 2, 4, 3, 5, 6)
    return x.reshape(b, v, (h // patch) * (w // patch), patch * patch * c)


def official_plucker_rays(c2w, K_norm, height: int, width: int):
    """[B, V, 4, 4], [B, V, 3, 3] -> [B, V, H, W, 6] = (o x d, d) with unit d (official `compute_rays`)."""
    origins, dirs = pixel_rays(c2w.astype(jnp.float32), K_norm.astype(jnp.float32), height, width)
    return jnp.concatenate([jnp.cross(origins, dirs), dirs], axis=-1)


class Tokenizer(nn.Module):
    """images [B, V, H, W, 3] in [0, 1], c2w [B, V, 4, 4], normalised K -> [B, V, P, Dr + Drgb]."""

    patch_size: int
    dim_rgb: int
    dim_rays: int
    camera_code: bool = True  # False: Table 5's "Plücker only" ablation
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, images, c2w, K_norm):
        _, _, h, w, _ = images.shape
        mean = jnp.asarray(IMAGENET_MEAN, jnp.float32)
        std = jnp.asarray(IMAGENET_STD, jnp.float32)
        rgb = patchify((images.astype(jnp.float32) - mean) / std, self.patch_size)
        rgb_tokens = dense(self.dim_rgb, "rgb_patch_embeds_1", self.dtype, use_bias=False,
                           kernel_init=TORCH_DEFAULT_INIT)(rgb)
        rays = patchify(official_plucker_rays(c2w, K_norm, h, w), self.patch_size)
        ray_tokens = dense(self.dim_rays, "ray_patch_embeds_1", self.dtype, use_bias=False,
                           kernel_init=TORCH_DEFAULT_INIT)(rays)
        if self.camera_code:
            code = CameraCode(self.dim_rays, self.dtype, name="view_pe")(c2w.astype(jnp.float32),
                                                                       K_norm.astype(jnp.float32))
            ray_tokens = ray_tokens + code[:, :, None, :]
        return jnp.concatenate([ray_tokens, rgb_tokens], axis=-1)
