"""Analytic, vectorised numpy ray caster for `SceneSpec` rooms (independent of the Gaussian rasterizer).

Rays are o + t d with d = R K^-1 (u, v, 1): the camera-space z of d is 1, so the hit parameter t *is*
the OpenCV z-depth of the hit point, exactly (no sampling, no discretisation). Shading is baked and
view independent (Lambert + ambient + one shadowing light + corner darkening), so every frame of a
scene sees the same radiance at a surface point: the multi-view consistency a 3DGS model relies on.
"""

from __future__ import annotations

import numpy as np

from data_pipelines.synthetic.scene_spec import SceneSpec

_EPS = 1e-6


def _dot3(a, b):
    """Row-wise dot product of [P, 3] arrays, or of [P, 3] with [3]. Written elementwise on purpose:
    BLAS gemv/gemm on [P, 3] operands is slow with a thread pool on an oversubscribed CPU."""
    if b.ndim == 1:
        return a[:, 0] * b[0] + a[:, 1] * b[1] + a[:, 2] * b[2]
    return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]


def _rows_times(a, m):
    """a @ m for a [P, 3] (or [3]) and m [3, 3], elementwise (see `_dot3`)."""
    if a.ndim == 1:
        return a @ m
    return a[:, 0:1] * m[0] + a[:, 1:2] * m[1] + a[:, 2:3] * m[2]
_GAMMA = 2.2
# Face index -> (world axes used as texture coordinates).
_FACE_UV_AXES = {0: (1, 2), 1: (1, 2), 2: (0, 2), 3: (0, 2), 4: (0, 1), 5: (0, 1)}


def _yaw_matrix(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _bounding_radius(obj) -> float:
    return float(np.linalg.norm(obj.half)) if hasattr(obj, "half") else float(obj.radius)


def _candidates(o, d, dd, center, radius, t_max=None):
    """Indices of rays o + t d (t > 0, or 0 < t < t_max) that pass within `radius` of `center`:
    a cheap bounding-sphere cull so that exact tests run on the few rays that can hit an object."""
    oc = center - o
    if oc.ndim == 1:
        if oc @ oc <= radius * radius:  # origin inside the bounding sphere: test every ray
            return np.arange(d.shape[0])
        proj = _dot3(d, oc)
        dist2 = (oc @ oc) - proj * proj / dd
        return np.nonzero((dist2 <= radius * radius) & (proj > 0))[0]
    raise ValueError("_candidates needs a single ray origin")


def _box_hit(o, d, box):
    """Slab test in the box frame. o [3] or [P, 3], d [P, 3] -> t [P] (inf on miss), axis [P], local p."""
    rot = _yaw_matrix(box.yaw)
    o_l = _rows_times(o - box.center, rot)  # world -> box frame is R^T x, i.e. x @ R
    d_l = _rows_times(d, rot)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(np.abs(d_l) < _EPS, _EPS, d_l)
        t1 = (-box.half - o_l) * inv
        t2 = (box.half - o_l) * inv
    t_lo = np.minimum(t1, t2)
    t_hi = np.maximum(t1, t2)
    t_near = t_lo.max(axis=-1)
    t_far = t_hi.min(axis=-1)
    hit = (t_far >= t_near) & (t_near > 1e-4)
    t = np.where(hit, t_near, np.inf)
    return t, t_lo.argmax(axis=-1), o_l, d_l


def _sphere_hit(o, d, sphere):
    oc = o - sphere.center
    a = _dot3(d, d)
    b = _dot3(d, oc) if oc.ndim == 1 else _dot3(oc, d)
    c = (oc @ oc if oc.ndim == 1 else _dot3(oc, oc)) - sphere.radius**2
    disc = b * b - a * c
    with np.errstate(invalid="ignore"):
        t = (-b - np.sqrt(np.maximum(disc, 0.0))) / a
    return np.where((disc >= 0) & (t > 1e-4), t, np.inf)


def _any_object_hit(spec: SceneSpec, light, points):
    """Shadow test: True where the segment light -> point crosses an object. light [3], points [P, 3].

    Cast from the light (a single origin, so the cheap bounding-sphere cull applies) towards each
    point; an occluder is a hit with t in (0, 1 - eps) (t = 1 is the shaded point itself).
    """
    d = points - light
    dd = _dot3(d, d)
    blocked = np.zeros(d.shape[0], bool)
    for obj in list(spec.boxes) + list(spec.spheres):
        idx = _candidates(light, d, dd, obj.center, _bounding_radius(obj))
        if idx.size == 0:
            continue
        if hasattr(obj, "half"):
            t, _, _, _ = _box_hit(light, d[idx], obj)
        else:
            t = _sphere_hit(light, d[idx], obj)
        blocked[idx] |= t < 1.0 - 1e-3
    return blocked


def _sample_texture(material, u, v, footprint):
    """Bilinear lookup at the mip level matching `footprint` (metres per pixel). u, v, footprint [P]."""
    out = np.empty(u.shape + (3,), np.float32)
    levels = material.levels
    lvl = np.clip(np.floor(np.log2(np.maximum(footprint, 1e-9) / material.texel_size)), 0, len(levels) - 1).astype(int)
    for level in np.unique(lvl):
        sel = lvl == level
        tex = levels[level]
        h, w = tex.shape[:2]
        if material.wrap:
            scale = material.texel_size * 2.0**level
            x = u[sel] / scale - 0.5
            y = -v[sel] / scale - 0.5  # v runs upwards on walls; image rows run downwards
        else:  # posters: (u, v) already in [0, 1] across the picture
            x = u[sel] * w - 0.5
            y = (1.0 - v[sel]) * h - 0.5
        x0 = np.floor(x).astype(int)
        y0 = np.floor(y).astype(int)
        fx = (x - x0)[:, None]
        fy = (y - y0)[:, None]
        if material.wrap:
            x0, x1 = x0 % w, (x0 + 1) % w
            y0, y1 = y0 % h, (y0 + 1) % h
        else:
            x0, x1 = np.clip(x0, 0, w - 1), np.clip(x0 + 1, 0, w - 1)
            y0, y1 = np.clip(y0, 0, h - 1), np.clip(y0 + 1, 0, h - 1)
        out[sel] = ((tex[y0, x0] * (1 - fx) + tex[y0, x1] * fx) * (1 - fy)
                    + (tex[y1, x0] * (1 - fx) + tex[y1, x1] * fx) * fy)
    return out


def cast_rays(spec: SceneSpec, origin: np.ndarray, dirs: np.ndarray, pixel_angle: float):
    """Shade rays o + t d.

    Args:
      origin: [3] world camera centre.
      dirs: [P, 3] ray directions with camera-space z = 1 (so t = z-depth).
      pixel_angle: radians per pixel (1 / fx in pixels), for mip selection.
    Returns:
      rgb [P, 3] float32 sRGB in [0, 1], depth [P] float32 z-depth, surface [P] int32 id
      (0-5 room faces, 6 + k box k, 6 + num_boxes + k sphere k).
    """
    size = spec.size
    P = dirs.shape[0]
    # Room: the camera is inside the box, so each ray leaves it through exactly one face.
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(dirs > 0, size, 0.0)
        t_axes = np.where(np.abs(dirs) > _EPS, (bound - origin) / dirs, np.inf)
    tx, ty, tz = t_axes[:, 0], t_axes[:, 1], t_axes[:, 2]
    axis = np.where(tx <= ty, np.where(tx <= tz, 0, 2), np.where(ty <= tz, 1, 2))
    t_best = np.minimum(np.minimum(tx, ty), tz)
    surface = (2 * axis + (dirs[np.arange(P), axis] > 0)).astype(np.int32)
    dd = _dot3(dirs, dirs)
    nb = len(spec.boxes)
    for k, obj in enumerate(list(spec.boxes) + list(spec.spheres)):
        idx = _candidates(origin, dirs, dd, obj.center, _bounding_radius(obj))
        if idx.size == 0:
            continue
        if k < nb:
            t, _, _, _ = _box_hit(origin, dirs[idx], obj)
        else:
            t = _sphere_hit(origin, dirs[idx], obj)
        closer = t < t_best[idx]
        t_best[idx[closer]] = t[closer]
        surface[idx[closer]] = 6 + k

    points = origin + t_best[:, None] * dirs
    normals = np.zeros((P, 3))
    albedo = np.zeros((P, 3), np.float32)
    ray_len = np.sqrt(dd)
    unit = dirs / ray_len[:, None]

    def footprint(sel, n):
        cos = np.abs(_dot3(unit[sel], n))
        return t_best[sel] * ray_len[sel] * pixel_angle / np.maximum(cos, 0.15)

    ao = np.ones(P)
    for face in range(6):
        sel = surface == face
        if not sel.any():
            continue
        ax = face // 2
        n = np.zeros(3)
        n[ax] = 1.0 if face % 2 == 0 else -1.0
        normals[sel] = n
        p = points[sel]
        a_ax, b_ax = _FACE_UV_AXES[face]
        a, b = p[:, a_ax], p[:, b_ax]
        mat = spec.materials[spec.face_materials[face]]
        fp = footprint(sel, np.broadcast_to(n, p.shape))
        col = _sample_texture(mat, a + spec.face_uv_offset[face, 0], b + spec.face_uv_offset[face, 1], fp)
        for poster in spec.posters:
            if poster.face != face:
                continue
            a0, b0, a1, b1 = poster.rect
            inside = (a >= a0) & (a <= a1) & (b >= b0) & (b <= b1)
            if inside.any():
                pu = (a[inside] - a0) / (a1 - a0)
                if face in (1, 2):  # keep pictures unmirrored when seen from inside the room
                    pu = 1.0 - pu
                pv = (b[inside] - b0) / (b1 - b0)
                # Poster texel_size is in picture widths, so the footprint is too.
                col[inside] = _sample_texture(spec.materials[poster.material], pu, pv, fp[inside] / (a1 - a0))
        albedo[sel] = col
        # Baked corner darkening: distance to the nearest other room plane.
        dist = np.concatenate([p, size - p], axis=-1)
        dist[:, face] = np.inf
        ao[sel] = 1.0 - 0.35 * np.exp(-dist.min(axis=-1) / 0.3)

    for k, box in enumerate(spec.boxes):
        sel = surface == 6 + k
        if not sel.any():
            continue
        rot = _yaw_matrix(box.yaw)
        p_l = _rows_times(points[sel] - box.center, rot)
        ax = np.argmax(np.abs(p_l) / box.half, axis=-1)
        n_l = np.zeros_like(p_l)
        n_l[np.arange(len(ax)), ax] = np.sign(p_l[np.arange(len(ax)), ax])
        n = _rows_times(n_l, rot.T)
        normals[sel] = n
        uv_axes = np.array([[1, 2], [0, 2], [0, 1]])[ax]
        rows = np.arange(len(ax))
        u = p_l[rows, uv_axes[:, 0]] + box.uv_offset[0]
        v = p_l[rows, uv_axes[:, 1]] + box.uv_offset[1]
        albedo[sel] = _sample_texture(spec.materials[box.material], u, v, footprint(sel, n))
    for k, sphere in enumerate(spec.spheres):
        sel = surface == 6 + nb + k
        if not sel.any():
            continue
        n = (points[sel] - sphere.center) / sphere.radius
        normals[sel] = n
        u = np.arctan2(n[:, 1], n[:, 0]) * sphere.radius * 2
        v = np.arccos(np.clip(n[:, 2], -1, 1)) * sphere.radius * 2
        albedo[sel] = _sample_texture(spec.materials[sphere.material], u, v, footprint(sel, n))

    # Baked lighting: ambient + inverse-square-ish point lights; light 0 is shadowed by objects.
    irradiance = np.broadcast_to(spec.ambient, (P, 3)) * ao[:, None]
    for i, (lp, lc) in enumerate(zip(spec.light_pos, spec.light_rgb)):
        to_light = lp - points
        dist = np.sqrt(_dot3(to_light, to_light))
        cos = np.clip(_dot3(normals, to_light) / dist, 0.0, None)
        gain = cos * 2.5 / (1.0 + (dist / 1.8) ** 2)
        if i == 0:
            idx = np.nonzero(cos > 0)[0]
            if idx.size:
                blocked = _any_object_hit(spec, lp, points[idx])
                gain[idx[blocked]] *= 0.15
        irradiance = irradiance + gain[:, None] * lc
    linear = albedo * irradiance
    rgb = np.power(np.clip(linear, 0.0, 1.0), 1.0 / _GAMMA).astype(np.float32)
    return rgb, t_best.astype(np.float32), surface


def camera_rays(K_norm: np.ndarray, height: int, width: int) -> np.ndarray:
    """[H * W, 3] camera-space directions with z = 1 through pixel centres ((c + 0.5) / W,
    (r + 0.5) / H), row-major, as in `locojax.geometry.cameras.pixel_rays`."""
    u = (np.arange(width) + 0.5) / width
    v = (np.arange(height) + 0.5) / height
    uu, vv = np.meshgrid(u, v, indexing="xy")
    pix = np.stack([uu, vv, np.ones_like(uu)], axis=-1).reshape(-1, 3)
    return pix @ np.linalg.inv(K_norm).T  # third row of K^-1 is (0, 0, 1): z = 1 exactly


def render_view(spec: SceneSpec, c2w: np.ndarray, K_norm: np.ndarray, height: int, width: int,
                cam_rays: np.ndarray | None = None):
    """Render one pinhole view. c2w [4, 4] OpenCV camera-to-world, K_norm [3, 3] normalized.

    Returns rgb [H, W, 3] float32 sRGB in [0, 1] and z-depth [H, W] float32 (metres).
    `cam_rays` may pass a cached `camera_rays(K_norm, height, width)`.
    """
    if cam_rays is None:
        cam_rays = camera_rays(K_norm, height, width)
    dirs = _rows_times(cam_rays, np.asarray(c2w[:3, :3], np.float64).T)
    rgb, depth, _ = cast_rays(spec, np.asarray(c2w[:3, 3], np.float64), dirs, 1.0 / (K_norm[0, 0] * width))
    return rgb.reshape(height, width, 3), depth.reshape(height, width)
