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
