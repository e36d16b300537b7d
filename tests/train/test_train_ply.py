"""INRIA .ply export: the raw layout read with plyfile, and a round trip that renders the same image."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from plyfile import PlyData

from locojax.io.ply import read_ply, write_ply
from locojax.types import Camera, Gaussians


def _gaussians(n=40, degree=1, seed=0):
    rng = np.random.default_rng(seed)
    k = (degree + 1) ** 2
    return Gaussians(
        means=(rng.normal(size=(n, 3)) * 0.5 + [0, 0, 3]).astype(np.float32),
        quats=rng.normal(size=(n, 4)).astype(np.float32),
        scales=rng.uniform(0.05, 0.3, size=(n, 3)).astype(np.float32),
        opacities=rng.uniform(0.05, 0.95, size=(n,)).astype(np.float32),
        sh=(rng.normal(size=(n, k, 3)) * 0.5).astype(np.float32),
    )


def test_raw_layout_is_inria(tmp_path):
    g = _gaussians()
    path = tmp_path / "s.ply"
    write_ply(str(path), g)
    v = PlyData.read(str(path))["vertex"]
    names = [p.name for p in v.properties]
    assert names[:9] == ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    assert names[9:18] == [f"f_rest_{i}" for i in range(9)]
    assert names[18:] == ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    d = v.data
    np.testing.assert_allclose(d["f_dc_1"], g.sh[:, 0, 1])
    # channel-major rest: f_rest_{c * 3 + j} is coefficient j + 1 of channel c
    np.testing.assert_allclose(d["f_rest_4"], g.sh[:, 2, 1])  # c=1, j=1
    np.testing.assert_allclose(d["f_rest_6"], g.sh[:, 1, 2])  # c=2, j=0
    np.testing.assert_allclose(1 / (1 + np.exp(-d["opacity"])), g.opacities, rtol=1e-5)
    np.testing.assert_allclose(np.exp(d["scale_2"]), g.scales[:, 2], rtol=1e-6)
    q = g.quats / np.linalg.norm(g.quats, axis=-1, keepdims=True)
    np.testing.assert_allclose(d["rot_0"], q[:, 0], rtol=1e-6)  # w first


def test_round_trip_renders_the_same_image(tmp_path):
    from locojax.render import rasterize

    g = _gaussians(degree=3, seed=1)
    path = tmp_path / "s.ply"
    write_ply(str(path), g)
    back = read_ply(str(path))
    cam = Camera(viewmat=jnp.eye(4), K=jnp.array([[40.0, 0, 16], [0, 40.0, 16], [0, 0, 1]]))
    render = jax.jit(lambda gs: rasterize(gs, cam, width=32, height=32, sh_degree=3).rgb)
    a = np.asarray(render(jax.tree_util.tree_map(jnp.asarray, g)))
    b = np.asarray(render(jax.tree_util.tree_map(jnp.asarray, back)))
    assert a.std() > 0.01  # not a blank image
    np.testing.assert_allclose(b, a, atol=1e-5)
