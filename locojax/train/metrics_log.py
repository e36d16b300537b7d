"""Run logging: `metrics.jsonl` (one JSON object per record), TensorBoard event files beside it,
PNG sample renders, and a tqdm progress bar for long runs. Only process 0 writes."""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import sys
import time

import numpy as np


def _jsonable(v):
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN/inf
    return v


def _open_tensorboard(logdir: str):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:  # TensorBoard is optional; metrics.jsonl is the record
        return None
    return SummaryWriter(logdir=logdir, flush_secs=30)


class MetricsLogger:
    def __init__(self, workdir: str, enabled: bool = True):
        self.enabled = enabled
        self.path = os.path.join(workdir, "metrics.jsonl")
        self._tb_pending = None
        if enabled:
            os.makedirs(workdir, exist_ok=True)
            # tensorboardX imports slowly: it loads beside the run's setup and the first record waits for it.
            pool = concurrent.futures.ThreadPoolExecutor(1, "locojax-tensorboard")
            self._tb_pending = pool.submit(_open_tensorboard, os.path.join(workdir, "tensorboard"))
            pool.shutdown(wait=False)

    @property
    def _tb(self):
        return None if self._tb_pending is None else self._tb_pending.result()

    def write(self, record: dict, prefix: str = "train") -> None:
        if not self.enabled:
            return
        record = {k: _jsonable(v) for k, v in record.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self._tb is not None:
            step = int(record.get("step", 0))
            for k, v in record.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._tb.add_scalar(f"{prefix}/{k}", v, step)

    def image(self, tag: str, image: np.ndarray, step: int) -> None:
        if self.enabled and self._tb is not None:
            self._tb.add_image(tag, image, step, dataformats="HWC")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(workdir: str) -> list[dict]:
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


SAMPLE_ROWS = ("context", "prediction", "target", "depth")


def _label(text: str, height: int, width: int) -> np.ndarray:
    """A black [height, width, 3] float tile with `text` in white (Pillow's built-in bitmap font)."""
    from PIL import Image, ImageDraw, ImageFont

    tile = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(tile)
    font = ImageFont.load_default()
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    draw.text((3, max((height - (bottom - top)) // 2 - top, 0)), text, fill=(255, 255, 255), font=font)
    return np.asarray(tile, np.float32) / 255.0


def sample_grid(context: np.ndarray, prediction: np.ndarray, target: np.ndarray,
                depth: np.ndarray | None = None) -> np.ndarray:
    """One scene's sample sheet, uint8 [H_grid, W_grid, 3], one labelled row each: the context
    views, the predictions, the targets and (if given) the predicted depth, turbo-coloured with near
    warm (inputs [V, H, W, 3] in [0, 1]; depth [V, H, W] or [V, H, W, 1])."""
    images = [context, prediction, target]
    if depth is not None:
        from locojax.io.video import colorize_depth

        d = np.asarray(depth, np.float32).reshape(np.shape(depth)[:3])
        images.append(colorize_depth(d, np.ones_like(d)))
    rows = [np.concatenate(list(x), axis=1) for x in images]
    width = max(r.shape[1] for r in rows)
    label_width = 66
    rows = [np.concatenate([_label(name, r.shape[0], label_width),
                            np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)))], axis=1)
            for name, r in zip(SAMPLE_ROWS, rows)]
    grid = np.concatenate(rows, axis=0)
    return (np.clip(grid, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def save_png(path: str, image_uint8: np.ndarray) -> None:
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(image_uint8).save(path)


class Progress:
    """tqdm bar (step, loss, PSNR, steps/s) when stderr is a terminal and the run is long;
    otherwise a concise line every log record."""

    def __init__(self, total: int, initial: int, enabled: bool, long_run_steps: int = 200):
        self.bar = None
        self._last = time.time()
        if enabled and total - initial >= long_run_steps and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, dynamic_ncols=True, unit="step")

    def update(self, step: int, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def log(self, record: dict) -> None:
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{record['loss']:.4f}", psnr=f"{record['psnr']:.2f}",
                                 sps=f"{record['steps_per_sec']:.2f}", refresh=False)
        else:
            print(f"step {record['step']:>7d}  loss {record['loss']:.5f}  psnr {record['psnr']:6.2f}  "
                  f"lr {record['lr']:.2e}  {record['steps_per_sec']:.2f} steps/s", flush=True)

    def message(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
