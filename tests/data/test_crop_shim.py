"""pixelSplat crop shim: covering LANCZOS resize + centre crop, intrinsics kept consistent."""

import numpy as np
from PIL import Image

from data_pipelines.crop import crop_region, rescale_and_crop


def _project(K_norm, w, h, point):
    p = K_norm @ point
    return p[0] / p[2] * w, p[1] / p[2] * h


def test_crop_shim_matches_pil_and_keeps_projection():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (36, 64, 3), dtype=np.uint8)
    K = np.array([[0.9, 0, 0.52], [0, 1.6, 0.47], [0, 0, 1]], np.float32)
    out, K2 = rescale_and_crop(image, K, (16, 16))
    # Independent reference: PIL resize to cover 16x16 (scale 16/36 -> 16 x 28), crop columns 6..22.
    ref = np.asarray(Image.fromarray(image).resize((28, 16), Image.LANCZOS))[:, 6:22]
    np.testing.assert_array_equal(out, ref)
    # A 3D point projects to the same place before (in resized pixels, minus the crop) and after.
    point = np.array([0.1, -0.05, 1.0])
    u0, v0 = _project(K.astype(np.float64), 28, 16, point)
    u1, v1 = _project(K2.astype(np.float64), 16, 16, point)
    np.testing.assert_allclose([u1, v1], [u0 - 6, v0], atol=1e-4)


def test_crop_region_updates_principal_point():
    image = np.zeros((20, 30, 3), np.uint8)
    K = np.array([[1.0, 0, 0.5], [0, 1.5, 0.5], [0, 0, 1]], np.float32)
    out, K2 = crop_region(image, K, 3, 2, 24, 16)
    assert out.shape == (16, 24, 3)
    np.testing.assert_allclose(K2[0], [30 / 24, 0, (15 - 3) / 24], atol=1e-6)
    np.testing.assert_allclose(K2[1], [0, 1.5 * 20 / 16, (10 - 2) / 16], atol=1e-6)


def test_principal_point_crop_centres_it():
    from data_pipelines.crop import principal_point_crop

    image = np.arange(40 * 60 * 3, dtype=np.uint8).reshape(40, 60, 3)
    K = np.array([[0.8, 0, 0.4], [0, 1.2, 0.55], [0, 0, 1]], np.float32)  # cx = 24 px, cy = 22 px
    out, K2 = principal_point_crop(image, K)
    assert out.shape == (36, 48, 3)  # half widths min(24, 36) = 24, min(22, 18) = 18
    np.testing.assert_allclose(K2[:2, 2], [0.5, 0.5], atol=1e-6)
    np.testing.assert_array_equal(out, image[4:40, 0:48])
    np.testing.assert_allclose([K2[0, 0], K2[1, 1]], [0.8 * 60 / 48, 1.2 * 40 / 36], atol=1e-6)
