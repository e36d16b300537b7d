"""Random reflection (TokenGS/LocusGS training, `config.data.reflect_prob`): a reflected sample is a
consistent scene. Gaussians mirrored in the world x = 0 plane and rendered by the rasteriser from the
reflected camera give the flipped image of the original render; the iterator's reflected batch is
the flipped batch with R c2w R and its depth still lands on the other views' depth."""

import numpy as np
import jax.numpy as jnp

from dp_helpers import tiny_config
from data_pipelines import make_train_iterator
from data_pipelines.augment import REFLECT, reflect_views
from locojax.render.dense import rasterize_dense
from locojax.types import Camera, Gaussians

W, H = 40, 32


def _render(means, quats, scales, colours, c2w, K_norm):
    g = Gaussians(means=jnp.asarray(means, jnp.float32), quats=jnp.asarray(quats, jnp.float32),
                  scales=jnp.asarray(scales, jnp.float32), opacities=jnp.full((len(means),), 0.8, jnp.float32),
                  sh=jnp.asarray((colours - 0.5) / 0.28209479177387814, jnp.float32)[:, None, :])
    K = K_norm * np.array([[W], [H], [1.0]], np.float32)
    cam = Camera(viewmat=jnp.asarray(np.linalg.inv(c2w), jnp.float32), K=jnp.asarray(K, jnp.float32))
    return np.asarray(rasterize_dense(g, cam, width=W, height=H, sh_degree=0, background=jnp.full((3,), 0.5)).rgb)


def _scene(seed=0, n=30):
    rng = np.random.default_rng(seed)
    means = rng.uniform([-1.5, -1.0, 2.0], [1.5, 1.0, 4.0], (n, 3))
    quats = rng.normal(size=(n, 4))
    quats /= np.linalg.norm(quats, axis=-1, keepdims=True)
    scales = rng.uniform([0.02, 0.05, 0.1], [0.1, 0.3, 0.4], (n, 3))  # anisotropic: orientation matters
    colours = rng.uniform(0, 1, (n, 3))
    a, b = 0.2, -0.1  # a camera turned about y and x, off the origin
    ry = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    c2w = np.eye(4)
    c2w[:3, :3], c2w[:3, 3] = ry @ rx, [0.3, -0.2, -0.4]
    K = np.array([[0.9, 0, 0.42], [0, 1.1, 0.55], [0, 0, 1]], np.float32)  # cx off-centre: mirroring it matters
    return means, quats, scales, colours, c2w, K


def test_reflected_gaussians_render_as_the_reflected_image():
    means, quats, scales, colours, c2w, K = _scene()
    image = _render(means, quats, scales, colours, c2w, K)
    assert image.std() > 0.05  # something is drawn
    flipped, K_r, c2w_r, _ = reflect_views(image[None], K[None], c2w[None])
    # the same Gaussians mirrored: x -> -x, rotation R M R, i.e. quaternion (w, x, -y, -z)
    mirrored = _render(means * [-1, 1, 1], quats * [1, 1, -1, -1], scales, colours, c2w_r[0], K_r[0])
    np.testing.assert_allclose(mirrored, flipped[0], atol=2e-4)
    np.testing.assert_allclose(np.linalg.det(c2w_r[0, :3, :3]), 1.0, atol=1e-6)  # a proper camera
    # The check has teeth: cx left unmirrored, or the camera reflected on one side only, do not match.
    K_bad = K_r[0].copy()
    K_bad[0, 2] = K[0, 2]
    assert np.abs(_render(means * [-1, 1, 1], quats * [1, 1, -1, -1], scales, colours, c2w_r[0], K_bad)
                  - flipped[0]).max() > 0.1
    centre_only = c2w.copy()
    centre_only[0, 3] *= -1  # the camera centre mirrored, its orientation not
    assert np.abs(_render(means * [-1, 1, 1], quats * [1, 1, -1, -1], scales, colours, centre_only, K_r[0])
                  - flipped[0]).max() > 0.1


def test_iterator_reflects_every_view_of_a_sample(synthetic_dir):
    plain = make_train_iterator(tiny_config(synthetic_dir, sampler="tokengs", load_depth=True), 0, 1)
    mirror = make_train_iterator(tiny_config(synthetic_dir, sampler="tokengs", load_depth=True, reflect_prob=1.0), 0, 1)
    a, b = next(plain), next(mirror)
    for va, vb in ((a.context, b.context), (a.target, b.target)):
        np.testing.assert_array_equal(vb.images, va.images[:, :, :, ::-1])  # same frames, flipped
        np.testing.assert_array_equal(vb.depth, va.depth[:, :, :, ::-1])
        np.testing.assert_allclose(vb.intrinsics[..., 0, 2], 1.0 - va.intrinsics[..., 0, 2], atol=1e-6)
        np.testing.assert_allclose(vb.c2w, REFLECT @ va.c2w @ REFLECT, atol=1e-6)
    from test_views_depth import _reprojection_error
    for s in range(2):
        err, n = _reprojection_error(b.context, s, 0, 1)
        assert n > 500 and err < 5e-3, (s, err, n)  # the mirrored sample is still one consistent scene
    plain.close()
    mirror.close()
