"""python -m experiments.benchmark data [--config=NAME ...] [--workers=1,2] [--image_shapes=256x256,256x448]
                                      [--batches=N] [--data_dir=DIR] [--out=FILE.json]

Input-pipeline throughput: batches/s and images decoded/s of the training iterator
(`data_pipelines.iterators.TrainIterator`, the one `experiments.train` uses) for a preset's batches
(its global batch size, context + target views, sampler, augmentation and scene frame), with
`data.num_threads` = 1, 2, ... worker threads, next to the rate one GPU needs at the paper's step
time and the rate 8 GPUs fed by this one host would need.

Data: the embedded synthetic dataset (JPEG frames, stored at 256 x 256; 256 x 448 batches are resized
and cropped from it), built offline once under --data_dir; the presets' real datasets (RE10K, DL3DV)
are not on the machine. Decoding a 256^2 JPEG is cheaper than the 360p/960p frames of the real data, so
these rates are upper bounds for them. Default: locosplat_6v, globalsplat_16k and tokengs_4096 at both
shapes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

DEFAULT_CONFIGS = ("locosplat_6v", "globalsplat_16k", "tokengs_4096")

# Samples (scenes) per second that one GPU consumes at the paper's training step time.
#   locosplat: 3.17 steps/s at batch 1 per GPU (LoCoSplat A.2; 4 GPUs, DDP), 6 + 8 views.
#   tokengs / locusgs: no training step time is published; the A100 forward alone takes 341 ms per
#     sample (LocusGS Sec. 4, DL3DV 4 views, TokenGS); forward + backward ~3x that gives ~1 sample/s
#     per GPU at batch 8 per GPU (an estimate, bf16 training may be faster).
#   globalsplat: no step time is published (220k steps, batch 16 on 4 GPUs); the LoCoSplat rate per
#     sample is used as a stand-in (both are sub-100M-parameter feed-forward models at 256^2).
GPU_SAMPLES_PER_SECOND = {
    "locosplat": (3.17, "LoCoSplat A.2: 3.17 steps/s, batch 1/GPU"),
    "tokengs": (1.0 / (3 * 0.341), "estimate: 3 x 341 ms A100 forward per sample (LocusGS Sec. 4)"),
    "locusgs": (1.0 / (3 * 0.341), "estimate: 3 x 341 ms A100 forward per sample (LocusGS Sec. 4)"),
    "globalsplat": (3.17, "no published step time; LoCoSplat's 3.17 samples/s/GPU as a stand-in"),
}


def _shape(text: str) -> tuple[int, int]:
    h, w = text.lower().split("x")
    return int(h), int(w)


def bench_one(name: str, image_shape, threads: int, batches: int, data_dir: str, frames: int, scenes: int) -> dict:
    import configs
    from data_pipelines.iterators import TrainIterator

    config = configs.get_config(name)
    config.dataset = "synthetic"
    d = config.data
    d.data_dir = data_dir
    d.image_shape = tuple(image_shape)
    d.synthetic_image_size = 256
    d.synthetic_num_frames = frames
    d.synthetic_num_train_scenes = scenes
    d.synthetic_num_test_scenes = 1
    d.num_threads = threads
    d.prefetch = max(2, 2 * threads)
    it = TrainIterator(config)
    try:
        first = next(it)  # starts the prefetch threads; not timed
        views = first.context.images.shape[1] + first.target.images.shape[1]
        batch = first.context.images.shape[0]
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        for _ in range(batches):
            next(it)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        it.close()
    family = config.model_family
    per_gpu, source = GPU_SAMPLES_PER_SECOND.get(family, (float("nan"), "unknown"))
    rate = batches / wall
    return dict(config=name, family=family, image_shape=list(image_shape), threads=threads, batch_size=batch,
                views_per_sample=views, batches=batches, seconds=wall, cpu_seconds=cpu,
                batches_per_s=rate, samples_per_s=rate * batch, images_per_s=rate * batch * views,
                gpu_samples_per_s=per_gpu, gpu_rate_source=source,
                gpus_fed=rate * batch / per_gpu, load_avg=round(os.getloadavg()[0], 2))


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark data", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", help="preset (repeatable); default: " + ", ".join(DEFAULT_CONFIGS))
    p.add_argument("--workers", default="1,2", help="comma-separated data.num_threads values")
    p.add_argument("--image_shapes", default="256x256,256x448")
    p.add_argument("--batches", type=int, default=8, help="timed batches per case (after one untimed)")
    p.add_argument("--frames", type=int, default=64, help="frames per synthetic scene")
    p.add_argument("--scenes", type=int, default=16, help="synthetic training scenes")
    p.add_argument("--data_dir", default=None, help="where the synthetic dataset is (built if missing); "
                                                     "default: a temporary directory")
    p.add_argument("--out", help="write the records to this .json")
    args = p.parse_args(argv)
    import configs

    names = args.config or list(DEFAULT_CONFIGS)
    for n in names:
        if n not in set(configs.config_names()):
            print(f"error: unknown config {n!r}", file=sys.stderr)
            return 2
    workers = [int(w) for w in args.workers.split(",")]
    shapes = [_shape(s) for s in args.image_shapes.split(",")]
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="locojax-data-bench-")
    t0 = time.perf_counter()
    bench_one(names[0], shapes[0], 1, 0, data_dir, args.frames, args.scenes)  # builds the dataset once
    print(f"synthetic dataset ready in {time.perf_counter() - t0:.0f} s under {data_dir}", flush=True)
    print("| config | batch (global) x views | shape | workers | batches/s | images decoded/s | CPU s / batch "
          "| one GPU needs (samples/s) | GPUs this host feeds | load avg |\n|---|---|---|---|---|---|---|---|---|---|",
          flush=True)
    records = []
    for name in names:
        for shape in shapes:
            for w in workers:
                r = bench_one(name, shape, w, args.batches, data_dir, args.frames, args.scenes)
                records.append(r)
                print(f"| {name} | {r['batch_size']} x {r['views_per_sample']} | {shape[0]}x{shape[1]} | {w} | "
                      f"{r['batches_per_s']:.2f} | {r['images_per_s']:.0f} | {r['cpu_seconds'] / args.batches:.2f} | "
                      f"{r['gpu_samples_per_s']:.2f} | {r['gpus_fed']:.1f} | {r['load_avg']:.1f} |", flush=True)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump(records, f, indent=1)
    return 0
