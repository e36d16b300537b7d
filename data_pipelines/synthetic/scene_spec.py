"""What is in one procedural room: box-shaped room, posters, furniture, lights (no rendering here).

World frame: z up, the room is the axis-aligned box [0, W] x [0, D] x [0, H] metres. Room faces are
numbered 0: x=0, 1: x=W, 2: y=0, 3: y=D, 4: floor z=0, 5: ceiling z=H. On a face, texture
coordinates (in metres) are the two remaining world axes in increasing order.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from data_pipelines.synthetic import textures


@dataclasses.dataclass
class Material:
    levels: list            # mip pyramid of linear RGB float32 [h, w, 3] arrays (level 0 first)
    texel_size: float       # metres per texel at level 0 (for posters: 1 / texels across)
    wrap: bool              # tile (walls, floors, furniture) or clamp to [0, 1] (posters)


@dataclasses.dataclass
class Box:
    center: np.ndarray      # [3] world
    half: np.ndarray        # [3] half extents in the box frame
    yaw: float              # rotation about world z (radians)
    material: int
    uv_offset: np.ndarray   # [2] metres, so that equal materials do not line up across boxes


@dataclasses.dataclass
class Sphere:
    center: np.ndarray
    radius: float
    material: int


@dataclasses.dataclass
class Poster:
    face: int               # room face it hangs on (0-3)
    rect: np.ndarray        # [4] (a0, b0, a1, b1) in that face's texture coordinates, metres
    material: int


@dataclasses.dataclass
class SceneSpec:
    size: np.ndarray        # [3] (W, D, H) metres
    face_materials: list    # [6] material index per room face
    face_uv_offset: np.ndarray  # [6, 2]
    posters: list
    boxes: list
    spheres: list
    light_pos: np.ndarray   # [L, 3]; light 0 casts shadows
    light_rgb: np.ndarray   # [L, 3]
    ambient: np.ndarray     # [3]
    materials: list


def _material_from_srgb(img, texel_size, wrap=True) -> Material:
    return Material(levels=textures.mip_pyramid(img), texel_size=float(texel_size), wrap=wrap)


def _surface_material(rng, kinds_photo_prob: float) -> Material:
    """A tiling material: a tinted photo or a procedural pattern, at a random physical scale."""
    if rng.random() < kinds_photo_prob:
        name = textures.SURFACE_PHOTOS[rng.integers(len(textures.SURFACE_PHOTOS))]
        img = textures.tinted_photo(name, rng)
        return _material_from_srgb(img, texel_size=rng.uniform(1.5, 4.0) / img.shape[1])
    kind = textures.PROCEDURAL_KINDS[rng.integers(len(textures.PROCEDURAL_KINDS))]
    img = textures.procedural_texture(kind, rng)
    return _material_from_srgb(img, texel_size=rng.uniform(0.8, 2.5) / img.shape[1])


def _box_footprint_radius(box: Box) -> float:
    return float(np.hypot(box.half[0], box.half[1]))


def sample_scene_spec(rng: np.random.Generator) -> SceneSpec:
    """Draw one furnished room. Deterministic given the generator state."""
    W, D = rng.uniform(4.0, 7.0, size=2)
    H = rng.uniform(2.5, 3.2)
    materials: list[Material] = []

    def add(m: Material) -> int:
        materials.append(m)
        return len(materials) - 1

    wall_a = add(_surface_material(rng, 0.5))
    wall_b = add(_surface_material(rng, 0.5)) if rng.random() < 0.6 else wall_a
    floor = add(_surface_material(rng, 0.5))
    ceiling_img = textures.procedural_texture("plaster", rng)
    ceiling_img = 0.75 + 0.2 * (ceiling_img.mean(-1, keepdims=True) - 0.5) + 0.05 * ceiling_img  # near white
    ceiling = add(_material_from_srgb(np.clip(ceiling_img, 0, 1), 3.0 / 256))
    walls = [wall_a, wall_a, wall_b, wall_b] if rng.random() < 0.5 else [wall_a, wall_b, wall_a, wall_b]
    face_materials = walls + [floor, ceiling]
    face_uv_offset = rng.uniform(0, 5, size=(6, 2))

    # Posters: photographs hung on walls (clamped textures, aspect ratio kept).
    posters = []
    for _ in range(int(rng.integers(2, 6))):
        name = textures.PICTURE_PHOTOS[rng.integers(len(textures.PICTURE_PHOTOS))]
        img = textures.load_photo(name)
        face = int(rng.integers(4))
        wall_len = D if face < 2 else W
        w = rng.uniform(0.6, 1.6)
        h = w * img.shape[0] / img.shape[1]
        a0 = rng.uniform(0.2, max(0.21, wall_len - w - 0.2))
        b0 = rng.uniform(0.9, max(0.91, H - h - 0.2))
        posters.append(Poster(face, np.array([a0, b0, a0 + w, b0 + h]), add(_material_from_srgb(img, 1.0 / img.shape[1], wrap=False))))

    furniture_mats = [add(_surface_material(rng, 0.4)) for _ in range(4)]
    boxes: list[Box] = []
    spheres: list[Sphere] = []
    size = np.array([W, D, H])

    def free(x, y, radius) -> bool:
        for b in boxes:
            if np.hypot(x - b.center[0], y - b.center[1]) < radius + _box_footprint_radius(b) + 0.05:
                return False
        for sp in spheres:
            if np.hypot(x - sp.center[0], y - sp.center[1]) < radius + sp.radius + 0.05:
                return False
        return True

    # Furniture along the walls (cabinets, shelves, sofas) ...
    for _ in range(int(rng.integers(4, 10))):
        half = np.array([rng.uniform(0.2, 0.9), rng.uniform(0.2, 0.45), rng.uniform(0.2, 1.0)])
        face = int(rng.integers(4))
        yaw = [np.pi / 2, np.pi / 2, 0.0, 0.0][face] + rng.normal(0, 0.05)
        along = rng.uniform(half[0] + 0.1, (D if face < 2 else W) - half[0] - 0.1)
        off = half[1] + rng.uniform(0.02, 0.3)
        x, y = {0: (off, along), 1: (W - off, along), 2: (along, off), 3: (along, D - off)}[face]
        if free(x, y, _box_footprint_radius(Box(None, half, 0, 0, None)) * 0.6):
            boxes.append(Box(np.array([x, y, half[2]]), half, yaw, furniture_mats[rng.integers(4)], rng.uniform(0, 3, 2)))
    # Wall shelves: thin slabs fixed to a wall between 0.9 m and 2 m.
    for _ in range(int(rng.integers(0, 3))):
        half = np.array([rng.uniform(0.3, 0.7), rng.uniform(0.1, 0.17), 0.02])
        face = int(rng.integers(4))
        yaw = [np.pi / 2, np.pi / 2, 0.0, 0.0][face]
        along = rng.uniform(half[0] + 0.1, (D if face < 2 else W) - half[0] - 0.1)
        off = half[1] + 0.005
        x, y = {0: (off, along), 1: (W - off, along), 2: (along, off), 3: (along, D - off)}[face]
        boxes.append(Box(np.array([x, y, rng.uniform(0.9, 2.0)]), half, yaw, furniture_mats[rng.integers(4)], rng.uniform(0, 3, 2)))
    # ... a table (slab on four legs) and loose boxes/spheres away from the walls.
    for _ in range(int(rng.integers(1, 3))):
        top = np.array([rng.uniform(0.3, 0.6), rng.uniform(0.3, 0.5), 0.025])
        x, y = rng.uniform(1.0, W - 1.0), rng.uniform(1.0, D - 1.0)
        height = rng.uniform(0.45, 0.8)
        yaw = rng.uniform(0, np.pi)
        if not free(x, y, float(np.hypot(top[0], top[1]))):
            continue
        mat = furniture_mats[rng.integers(4)]
        boxes.append(Box(np.array([x, y, height]), top, yaw, mat, rng.uniform(0, 3, 2)))
        c, s = np.cos(yaw), np.sin(yaw)
        for sx in (-1, 1):
            for sy in (-1, 1):
                lx, ly = sx * (top[0] - 0.05), sy * (top[1] - 0.05)
                leg = Box(np.array([x + c * lx - s * ly, y + s * lx + c * ly, (height - 0.025) / 2]),
                          np.array([0.025, 0.025, (height - 0.025) / 2]), yaw, mat, np.zeros(2))
                boxes.append(leg)
        if rng.random() < 0.7:
            r = rng.uniform(0.07, 0.15)
            spheres.append(Sphere(np.array([x, y, height + 0.025 + r]), r, add(_surface_material(rng, 0.5))))
    for _ in range(int(rng.integers(0, 3))):  # crates in the open
        half = np.array([rng.uniform(0.15, 0.35), rng.uniform(0.15, 0.35), rng.uniform(0.15, 0.45)])
        x, y = rng.uniform(0.8, W - 0.8), rng.uniform(0.8, D - 0.8)
        if free(x, y, float(np.hypot(half[0], half[1]))):
            boxes.append(Box(np.array([x, y, half[2]]), half, rng.uniform(0, np.pi), furniture_mats[rng.integers(4)], rng.uniform(0, 3, 2)))
    for _ in range(int(rng.integers(0, 3))):
        r = rng.uniform(0.15, 0.35)
        x, y = rng.uniform(0.6, W - 0.6), rng.uniform(0.6, D - 0.6)
        if free(x, y, r):
            spheres.append(Sphere(np.array([x, y, r]), r, add(_surface_material(rng, 0.5))))

    num_lights = int(rng.integers(1, 4))
    light_pos = np.stack([rng.uniform([0.8, 0.8, H - 0.4], [W - 0.8, D - 0.8, H - 0.15]) for _ in range(num_lights)])
    warm = np.array([1.0, 0.93, 0.82])
    light_rgb = np.stack([warm * rng.uniform(0.6, 1.0) * (1.0 if i == 0 else 0.5) for i in range(num_lights)])
    ambient = np.array([0.9, 0.95, 1.0]) * rng.uniform(0.2, 0.35)
    return SceneSpec(size, face_materials, face_uv_offset, posters, boxes, spheres, light_pos, light_rgb, ambient, materials)


def obstacle_discs(spec: SceneSpec) -> np.ndarray:
    """[M, 3] (x, y, radius) floor discs covering every object, for camera path planning."""
    discs = [(b.center[0], b.center[1], _box_footprint_radius(b)) for b in spec.boxes]
    discs += [(s.center[0], s.center[1], s.radius) for s in spec.spheres]
    return np.array(discs, np.float64).reshape(-1, 3)
