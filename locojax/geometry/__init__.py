"""Camera conventions and geometric helpers (OpenCV axes throughout)."""

from locojax.geometry.cameras import (  # noqa: F401
    c2w_to_w2c,
    w2c_to_c2w,
    camera_centers,
    normalize_intrinsics,
    denormalize_intrinsics,
    cameras_from_views,
    pixel_rays,
    plucker_rays,
)
