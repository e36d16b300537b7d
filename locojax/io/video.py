"""Video frames and files: RGB + depth side by side, written as mp4 (imageio-ffmpeg, whose ffmpeg
binary ships inside its wheel: nothing is downloaded) and GIF (Pillow).

    frames = side_by_side(rgb [F, H, W, 3] in [0, 1], depth [F, H, W], alpha [F, H, W])  # uint8
    write_mp4(path, frames, fps=24); write_gif(path, frames, fps=12)
"""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np

# Turbo colormap (Mikhailov 2019), the published 6th-order polynomial fit per channel: a perceptual
# rainbow without a matplotlib dependency.
_TURBO = np.array([
    [0.13572138, 4.61539260, -42.66032258, 132.13108234, -152.94239396, 59.28637943],
    [0.09140261, 2.19418839, 4.84296658, -14.18503333, 4.27729857, 2.82956604],
    [0.10667330, 12.64194608, -60.58204836, 110.36276771, -89.90310912, 27.34824973],
])


def turbo(x):
    """[...] values in [0, 1] -> [..., 3] colours in [0, 1]."""
    x = np.clip(np.asarray(x, np.float64), 0.0, 1.0)
    powers = np.stack([x ** i for i in range(6)], axis=-1)  # [..., 6]
    return np.clip(powers @ _TURBO.T, 0.0, 1.0)


def colorize_depth(depth, alpha, lo=None, hi=None):
    """Depth [F, H, W] -> turbo colours [F, H, W, 3], near warm (red) and far cold (blue), range from the 2nd/98th percentiles of covered pixels (alpha > 0.5) of all
    frames so colours mean the same depth in every frame; uncovered pixels are black."""
    depth = np.asarray(depth, np.float64)
    covered = np.asarray(alpha) > 0.5
    values = depth[covered] if covered.any() else depth.reshape(-1)
    if lo is None or hi is None:
        lo, hi = (np.percentile(values, [2, 98]) if values.size else (0.0, 1.0))
    t = (depth - lo) / max(hi - lo, 1e-8)
    rgb = turbo(1.0 - t)  # near: warm
    return np.where(covered[..., None], rgb, 0.0)


def side_by_side(rgb, depth, alpha) -> np.ndarray:
    """uint8 frames [F, H, 2W, 3]: RGB left, colourised depth right."""
    rgb = np.clip(np.asarray(rgb, np.float64), 0.0, 1.0)
    both = np.concatenate([rgb, colorize_depth(depth, alpha)], axis=2)
    return (both * 255.0 + 0.5).astype(np.uint8)


def _even(frames: np.ndarray) -> np.ndarray:
    """Pad H and W to even sizes (yuv420p, the widely playable H.264 layout, needs them)."""
    f, h, w, _ = frames.shape
    return np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))


@contextlib.contextmanager
def _ffmpeg_subprocess():
    """imageio-ffmpeg starts ffmpeg with subprocess (fork + exec at once); JAX's at-fork hook warns
    that forking a multithreaded process may deadlock, which cannot happen before an exec: silence
    exactly that warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        yield


def write_mp4(path: str, frames: np.ndarray, fps: int = 24) -> str:
    import imageio.v2 as imageio

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with _ffmpeg_subprocess():
        imageio.mimwrite(path, list(_even(frames)), fps=fps, codec="libx264", quality=8,
                         pixelformat="yuv420p", macro_block_size=1)
    return path


def write_gif(path: str, frames: np.ndarray, fps: int = 12) -> str:
    from PIL import Image

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(round(1000 / fps)), loop=0)
    return path


def read_video(path: str) -> np.ndarray:
    """All frames of a video file as uint8 [F, H, W, 3] (tests, notebooks)."""
    import imageio.v2 as imageio

    with _ffmpeg_subprocess():
        reader = imageio.get_reader(path)
        try:
            return np.stack([np.asarray(f)[..., :3] for f in reader])
        finally:
            reader.close()
