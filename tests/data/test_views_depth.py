"""Optional per-view depth (`config.data.load_depth=True` -> Views.depth [B, V, H, W]): shapes, and
geometric consistency with the cameras after the crop shim and the augmentation crop: depth of one
view, lifted to 3D with its (cropped) intrinsics and pose, lands on the depth the other views
recorded for the same surface (the synthetic scenes are analytic ray casts)."""

import numpy as np
import pytest

from dp_helpers import tiny_config
from data_pipelines import make_eval_iterator, make_train_iterator
from data_pipelines.crop import rescale_and_crop


def _reprojection_error(views, s: int, a: int, b: int) -> tuple[float, int]:
    """Median relative difference between the depth of view a's pixels, lifted to 3D and seen from
    view b, and the depth view b recorded at that pixel; and how many points land inside view b."""
    depth, K, c2w = views.depth[s], views.intrinsics[s], views.c2w[s].astype(np.float64)
    h, w = depth.shape[1:]
    v, u = np.mgrid[0:h, 0:w] + 0.5  # pixel centres
    z = depth[a].astype(np.float64)
    ok = z > 0
    x = ((u / w - K[a, 0, 2]) / K[a, 0, 0]) * z
    y = ((v / h - K[a, 1, 2]) / K[a, 1, 1]) * z
    world = np.stack([x, y, z, np.ones_like(z)], -1)[ok] @ c2w[a].T
    cam_b = world @ np.linalg.inv(c2w[b]).T
    zb = cam_b[:, 2]
    ub = (K[b, 0, 0] * cam_b[:, 0] / zb + K[b, 0, 2]) * w
    vb = (K[b, 1, 1] * cam_b[:, 1] / zb + K[b, 1, 2]) * h
    inside = (zb > 0) & (ub >= 0) & (ub < w) & (vb >= 0) & (vb < h)
    seen = depth[b][vb[inside].astype(int), ub[inside].astype(int)]
    return float(np.median(np.abs(seen - zb[inside]) / zb[inside])), int(inside.sum())


@pytest.mark.parametrize("augment", [False, True])
def test_train_depth_matches_cameras(synthetic_dir, augment):
    cfg = tiny_config(synthetic_dir, sampler="tokengs", load_depth=True, augment=augment, image_shape=(48, 64))
    it = make_train_iterator(cfg, 0, 1)
    b = next(it)
    assert b.context.depth.shape == (2, 2, 48, 64) and b.target.depth.shape == (2, 6, 48, 64)
    assert b.context.depth.dtype == np.float32 and np.all(b.context.depth >= 0)
    assert np.mean(b.context.depth > 0) > 0.95  # the rooms are closed: almost every pixel has depth
    for s in range(2):
        err, n = _reprojection_error(b.context, s, 0, 1)
        assert n > 500 and err < 5e-3, (s, err, n)  # 64-pixel images: ~0.1-0.3% from pixel quantisation
    it.close()


def test_eval_depth_and_a_misaligned_crop_is_caught(synthetic_dir):
    cfg = tiny_config(synthetic_dir, load_depth=True, eval_batch_size=2, num_context_views=2, num_target_views=3)
    batch, _ = next(iter(make_eval_iterator(cfg, "synthetic")))
    assert batch.context.depth.shape == (2, 2, 64, 64) and batch.target.depth.shape == (2, 3, 64, 64)
    err, _ = _reprojection_error(batch.context, 0, 0, 1)
    assert err < 5e-3
    # The check has teeth: view 0's depth shifted by 3 pixels against its camera (measured: 0.08% ->
    # 0.45% and 0.24% -> 0.85% on the two scenes) is clearly worse.
    depth = batch.context.depth.copy()
    depth[:, 0] = np.roll(depth[:, 0], 3, axis=-1)
    assert _reprojection_error(batch.context.replace(depth=depth), 0, 0, 1)[0] > 2 * err


def test_depth_resize_is_nearest_and_keeps_unknown():
    depth = np.zeros((40, 60), np.float32)
    depth[:, 30:] = 5.0  # a depth edge; 0 = unknown on the left
    out, _ = rescale_and_crop(depth, np.eye(3, dtype=np.float32), (20, 20))
    assert set(np.unique(out).tolist()) <= {0.0, 5.0}  # no invented in-between surfaces


def test_scene_without_depth_names_the_scene():
    from dp_helpers import jpeg_bytes
    from data_pipelines.records import make_record
    from data_pipelines.views import prepare_views

    image = np.zeros((16, 16, 3), np.uint8)
    record = make_record("scene_without_depth", [jpeg_bytes(image)] * 2, np.tile(np.eye(3), (2, 1, 1)),
                         np.tile(np.eye(4), (2, 1, 1)), [0, 1])
    assert prepare_views(record, np.array([0, 1]), (16, 16)).depth is None
    with pytest.raises(ValueError, match="scene_without_depth.*no stored depth"):
        prepare_views(record, np.array([0, 1]), (16, 16), with_depth=True)
