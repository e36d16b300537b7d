"""Random test scenes for the rasterizer tests (numpy; shared by the test modules)."""

from __future__ import annotations

import numpy as np

from locojax.types import Camera, Gaussians


def random_scene(n, *, width, height, sh_degree, seed=0, scale=0.12, depth=(1.5, 5.0), spread=1.2):
    """n Gaussians mostly in front of a camera at the origin looking down +z (numpy float32)."""
    rng = np.random.default_rng(seed)
    f = 0.9 * max(width, height)
    z = rng.uniform(*depth, n)
    u = width / 2 + rng.uniform(-0.7, 0.7, n) * width * spread
    v = height / 2 + rng.uniform(-0.7, 0.7, n) * height * spread
    means = np.stack([(u - width / 2) * z / f, (v - height / 2) * z / f, z], -1)
    k = (sh_degree + 1) ** 2
    arrays = dict(
        means=means,
        quats=rng.normal(size=(n, 4)),
        scales=scale * np.exp(rng.normal(0, 0.4, (n, 3))),
        opacities=rng.uniform(0.05, 0.99, n),
        sh=rng.normal(0, 0.4, (n, k, 3)),
    )
    arrays = {key: a.astype(np.float32) for key, a in arrays.items()}
    # A slightly rotated and translated camera, so that world != camera frame.
    angle = 0.1
    rot = np.array([[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]])
    viewmat = np.eye(4)
    viewmat[:3, :3] = rot
    viewmat[:3, 3] = [0.05, -0.03, 0.1]
    K = np.array([[f, 0, width / 2 + 0.3], [0, f * 1.05, height / 2 - 0.4], [0, 0, 1]])
    return arrays, viewmat.astype(np.float32), K.astype(np.float32)


def to_jax(arrays, viewmat, K):
    import jax.numpy as jnp

    g = Gaussians(**{k: jnp.asarray(v) for k, v in arrays.items()})
    return g, Camera(viewmat=jnp.asarray(viewmat), K=jnp.asarray(K))
