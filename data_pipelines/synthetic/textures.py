"""Texture sources of the synthetic rooms: scikit-image's bundled photographs plus procedural patterns.

Every texture is float32 [h, w, 3] in *linear* RGB (sRGB decoded with gamma 2.2), stored as a mip
pyramid so that the ray caster can pick the level matching each pixel's footprint (one ray per pixel
would otherwise alias badly on brick or gravel seen at a distance).
"""

from __future__ import annotations

import functools

import numpy as np

# Photographs bundled inside the scikit-image wheel (no download): (name, kind). "surface" photos tile
# well as wall/floor material, "picture" photos are hung as posters or used on furniture.
SURFACE_PHOTOS = ("brick", "grass", "gravel", "coins")
PICTURE_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "camera", "moon",
                  "immunohistochemistry", "colorwheel", "motorcycle", "text", "page", "clock")

_GAMMA = 2.2


@functools.lru_cache(maxsize=None)
def load_photo(name: str) -> np.ndarray:
    """A scikit-image sample image as float32 [h, w, 3] sRGB in [0, 1] (gray images replicated)."""
    import skimage.data

    if name == "motorcycle":
        img = skimage.data.stereo_motorcycle()[0]
    else:
        img = getattr(skimage.data, name)()
    img = np.asarray(img)
    if img.dtype == bool:
        img = img.astype(np.uint8) * 255
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    img = img[..., :3].astype(np.float32) / 255.0
    # Large photos are reduced once: a 256x256 frame never needs more than ~512 texels across.
    if max(img.shape[:2]) > 600:
        step = int(np.ceil(max(img.shape[:2]) / 512))
        img = img[::step, ::step]
    return np.ascontiguousarray(img)


def _value_noise(rng: np.random.Generator, size: int, octaves: int = 5, base: int = 4) -> np.ndarray:
    """Tileable fractal value noise [size, size] in [0, 1] (bilinear upsampled random lattices)."""
    out = np.zeros((size, size), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        cells = base * 2**o
        if cells > size:
            break
        lattice = rng.random((cells, cells)).astype(np.float32)
        coords = (np.arange(size, dtype=np.float32) + 0.5) * cells / size - 0.5
        i0 = np.floor(coords).astype(int)
        f = coords - i0
        f = f * f * (3 - 2 * f)  # smoothstep: no visible lattice creases
        i0 %= cells
        i1 = (i0 + 1) % cells
        rows0 = lattice[i0][:, i0] * (1 - f)[None, :] + lattice[i0][:, i1] * f[None, :]
        rows1 = lattice[i1][:, i0] * (1 - f)[None, :] + lattice[i1][:, i1] * f[None, :]
        out += amp * (rows0 * (1 - f)[:, None] + rows1 * f[:, None])
        total += amp
        amp *= 0.5
    return out / total


def _random_colour(rng: np.random.Generator, saturation=(0.2, 0.7), value=(0.35, 0.95)) -> np.ndarray:
    h = rng.random()
    s = rng.uniform(*saturation)
    v = rng.uniform(*value)
    k = (np.array([5.0, 3.0, 1.0]) + h * 6) % 6
    return (v - v * s * np.clip(np.minimum(k, 4 - k), 0, 1)).astype(np.float32)


def procedural_texture(kind: str, rng: np.random.Generator, size: int = 256) -> np.ndarray:
    """A procedural sRGB texture [size, size, 3] in [0, 1]: plaster, wood, tiles, stripes, checker."""
    c1, c2 = _random_colour(rng), _random_colour(rng)
    n = _value_noise(rng, size)[..., None]
    yy, xx = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    if kind == "plaster":
        img = c1 * (0.8 + 0.35 * n)
    elif kind == "wood":
        warp = _value_noise(rng, size, octaves=3, base=2)
        grain = np.sin((xx / size * rng.integers(6, 14) + 4 * warp) * 2 * np.pi)[..., None]
        base = np.array([0.55, 0.36, 0.2], np.float32) * rng.uniform(0.7, 1.2)
        img = base * (0.75 + 0.15 * grain + 0.25 * n)
        planks = rng.integers(3, 7)
        img = img * np.where((yy % (size // planks)) < 2, 0.55, 1.0)[..., None]
    elif kind == "tiles":
        cells = int(rng.integers(4, 9))
        period = size // cells
        grout = ((yy % period) < 2) | ((xx % period) < 2)
        checker = (((yy // period) + (xx // period)) % 2 == 0)[..., None]
        img = np.where(checker, c1, c2 * 0.9 + c1 * 0.1) * (0.9 + 0.15 * n)
        img = np.where(grout[..., None], 0.3 * c1 + 0.25, img)
    elif kind == "stripes":
        period = int(rng.integers(12, 40))
        band = ((xx + yy * rng.integers(0, 2)) // period) % 2 == 0
        img = np.where(band[..., None], c1, c2) * (0.85 + 0.2 * n)
    elif kind == "checker":
        period = int(rng.integers(16, 64))
        band = ((xx // period) + (yy // period)) % 2 == 0
        img = np.where(band[..., None], c1, c2) * (0.9 + 0.15 * n)
    else:
        raise ValueError(f"unknown procedural texture kind {kind!r}")
    return np.clip(img, 0.0, 1.0).astype(np.float32)


PROCEDURAL_KINDS = ("plaster", "wood", "tiles", "stripes", "checker")


def tinted_photo(name: str, rng: np.random.Generator) -> np.ndarray:
    """A surface photo (mostly grayscale) tinted by a random colour, so repeated photos differ."""
    img = load_photo(name)
    tint = 0.55 + 0.6 * _random_colour(rng, saturation=(0.1, 0.5), value=(0.6, 1.0))
    return np.clip(img * tint, 0.0, 1.0).astype(np.float32)


def mip_pyramid(srgb: np.ndarray, min_size: int = 2) -> list[np.ndarray]:
    """Linear-RGB mip levels of an sRGB texture: level 0 full size, each next one 2x2-box averaged."""
    level = np.power(srgb.astype(np.float32), _GAMMA)
    levels = [level]
    while min(level.shape[:2]) >= 2 * min_size:
        h, w = (level.shape[0] // 2) * 2, (level.shape[1] // 2) * 2
        level = level[:h, :w].reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
        levels.append(level)
    return levels
