"""Frame encodings stored in the TFDS records: JPEG/PNG colour frames, 16-bit PNG depth.

Colour frames are kept as the *encoded bytes* of the source (RealEstate10K's JPEGs are stored
unchanged, so nothing is re-encoded) and decoded with PIL only for the frames a sampler picks.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def encode_jpeg(image: np.ndarray, quality: int = 95) -> bytes:
    """uint8 [H, W, 3] -> JPEG bytes (4:4:4 chroma, so colour edges survive)."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(image, np.uint8)).save(buf, format="JPEG", quality=quality, subsampling=0)
    return buf.getvalue()


def encode_png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.asarray(image)).save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


def check_image_bytes(data: bytes, where: str) -> None:
    """Raise ValueError naming `where` unless `data` starts like a JPEG or PNG file."""
    if not (data[:3] == JPEG_MAGIC or data[:8] == PNG_MAGIC):
        raise ValueError(f"{where}: frame is not a JPEG/PNG (first bytes {bytes(data[:8])!r})")


def decode_image(data: bytes) -> np.ndarray:
    """Encoded JPEG/PNG -> uint8 [H, W, 3] (PIL's decoder, the one pixelSplat uses)."""
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def encode_depth_png(depth: np.ndarray, units_per_metre: float) -> bytes:
    """float [H, W] metres -> 16-bit PNG of round(depth * units_per_metre); 0 = invalid."""
    q = np.round(np.asarray(depth, np.float64) * units_per_metre)
    if (q > 65535).any():
        raise ValueError(f"depth {depth.max():.2f} m exceeds the 16-bit range at {units_per_metre} units/m")
    buf = io.BytesIO()
    Image.fromarray(q.astype(np.uint16)).save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


def decode_depth_png(data: bytes, units_per_metre: float) -> np.ndarray:
    """16-bit PNG -> float32 [H, W] metres."""
    with Image.open(io.BytesIO(data)) as img:
        return (np.asarray(img).astype(np.float32) / np.float32(units_per_metre))
