"""Shared pytrees of locojax.

All of these are `flax.struct.dataclass`es, so they pass through `jax.jit`, `jax.vmap`,
`jax.tree_util` and sharding annotations unchanged. Conventions used everywhere:

* Cameras are OpenCV: x right, y down, z forward. `viewmat` is world-to-camera, `c2w` its inverse.
* `Camera.K` holds intrinsics in *pixels*; `Views.intrinsics` holds them *normalized* by image size
  (fx / W, cx / W; fy / H, cy / H), as the pixelSplat family of codebases stores them.
* Quaternions are (w, x, y, z) and need not be unit length (they are normalized where used).
* Spherical harmonics are [..., K, 3] with K = (degree + 1)**2, DC first, gsplat's ordering.
"""

from __future__ import annotations

from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array | np.ndarray


@flax.struct.dataclass
class Gaussians:
    """A set of 3D Gaussians (optionally with leading batch axes).

    Attributes:
      means:     [..., N, 3] world-space centres.
      quats:     [..., N, 4] rotations as (w, x, y, z); need not be normalized.
      scales:    [..., N, 3] linear standard deviations along the local axes, > 0.
      opacities: [..., N]    in [0, 1].
      sh:        [..., N, K, 3] SH coefficients, K = (degree + 1)**2, DC first.
    """

    means: Array
    quats: Array
    scales: Array
    opacities: Array
    sh: Array

    @property
    def num_gaussians(self) -> int:
        return self.means.shape[-2]

    @property
    def sh_degree(self) -> int:
        k = self.sh.shape[-2]
        d = int(round(k**0.5)) - 1
        if (d + 1) ** 2 != k:
            raise ValueError(f"Gaussians.sh has K={k} coefficients, not a square (degree + 1)**2")
        return d

    def __getitem__(self, idx) -> "Gaussians":
        """Index the leading (batch) axes of every field, e.g. `g[0]` for the first scene."""
        return jax.tree_util.tree_map(lambda x: x[idx], self)

    @classmethod
    def concatenate(cls, parts: list["Gaussians"], axis: int = -2) -> "Gaussians":
        """Concatenate along the Gaussian axis (axis -2 of means; -1 of opacities)."""
        if axis != -2:
            raise ValueError("Gaussians.concatenate only joins along the Gaussian axis")
        return cls(
            means=jnp.concatenate([p.means for p in parts], axis=-2),
            quats=jnp.concatenate([p.quats for p in parts], axis=-2),
            scales=jnp.concatenate([p.scales for p in parts], axis=-2),
            opacities=jnp.concatenate([p.opacities for p in parts], axis=-1),
            sh=jnp.concatenate([p.sh for p in parts], axis=-3),
        )


@flax.struct.dataclass
class Camera:
    """A pinhole camera (optionally with leading batch axes).

    Attributes:
      viewmat: [..., 4, 4] world-to-camera, OpenCV axes.
      K:       [..., 3, 3] intrinsics in pixels.
    """

    viewmat: Array
    K: Array


@flax.struct.dataclass
class RenderOutput:
    """What `locojax.render.rasterize` returns for one camera (leading axes under vmap).

    Attributes:
      rgb:      [..., H, W, 3] colour, background composited.
      depth:    [..., H, W, 1] expected depth: sum_i w_i z_i / alpha (gsplat's "ED"); 0 where alpha=0.
      alpha:    [..., H, W, 1] accumulated opacity 1 - T_final.
      overflow: [...] int32, Gaussian-tile pairs dropped for lack of capacity (0 when none).
      num_invalid: [...] int32, Gaussians dropped because a field was non-finite.
    """

    rgb: Array
    depth: Array
    alpha: Array
    overflow: Array
    num_invalid: Array


@flax.struct.dataclass
class Views:
    """A fixed-shape batch of posed views, as data pipelines produce and models consume.

    Attributes:
      images:     [B, V, H, W, 3] float32 in [0, 1].
      intrinsics: [B, V, 3, 3] float32, normalized by image width/height.
      c2w:        [B, V, 4, 4] float32, OpenCV camera-to-world.
      near:       [B, V] float32.
      far:        [B, V] float32.
      index:      [B, V] int32 frame indices within the source scene (-1 where unknown).
      depth:      optional [B, V, H, W] float32 z-depth (along the camera's z axis) in the scene's
                  units, 0 where unknown; None unless the data config asks for it
                  (`config.data.load_depth=True`, datasets with stored depth: synthetic, ScanNet).
                  Cropped and resized with the images (nearest neighbour). See data_pipelines/CONTRACT.md.

    Optional per-view extras are fields with a None default: None is an empty pytree, so jit,
    sharding and tree_map carry a batch with or without them (each choice compiles once).
    """

    images: Array
    intrinsics: Array
    c2w: Array
    near: Array
    far: Array
    index: Array
    depth: Optional[Array] = None

    @property
    def image_shape(self) -> tuple[int, int]:
        return tuple(self.images.shape[-3:-1])  # (H, W)

    @property
    def num_views(self) -> int:
        return self.images.shape[1]


@flax.struct.dataclass
class Batch:
    """One training or evaluation batch.

    Attributes:
      context: Views the model sees.
      target:  Views it is supervised or evaluated on.
      scene_id: [B] int32, the scene's index in its split (for logging; -1 if padded).

    Family-neutral: a model that needs more structure (e.g. GlobalSplat's context subsets) derives
    it from these fields; per-view extras travel as optional fields of `Views` (see `Views.depth`).
    """

    context: Views
    target: Views
    scene_id: Array
