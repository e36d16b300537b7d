"""Build a dataset into TFDS (array_record) under --data_dir.

    python -m data_pipelines.build re10k --manual_dir=SRC --data_dir=OUT   # SRC: {train,test}/ chunks + index.json
    python -m data_pipelines.build acid  --manual_dir=SRC --data_dir=OUT
    python -m data_pipelines.build dl3dv --manual_dir=SRC --data_dir=OUT   # DepthSplat's chunk conversion
    python -m data_pipelines.build scannet --manual_dir=SRC --data_dir=OUT # FreeSplat layout: SRC/{train,test}/sceneXXXX_XX/
    python -m data_pipelines.build colmap --manual_dir=SRC --data_dir=OUT   # SRC: images/ + sparse/0/ (or folders of such)
    python -m data_pipelines.build transforms --manual_dir=SRC --data_dir=OUT  # SRC: transforms.json + images (or folders)
                                   [--normalize=none|cameras]
    python -m data_pipelines.build synthetic --data_dir=OUT [--num_train=256 --num_test=32 --image_size=256
                                                             --num_frames=64 --seed=0 --workers=2]

TFDS writes into a temporary `incomplete.*` folder and renames it when done: an interrupted build
leaves no half dataset behind, and rerunning builds it again; a finished dataset is never rebuilt.
Skipped (bad) scenes are counted and printed at the end. Users' own scenes (colmap, transforms) are
not skipped: a bad one stops the build with one line naming the file and the image, and exit status 1
(docs/your_own_scenes.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from data_pipelines import datasets
from data_pipelines.config import DataConfig
from data_pipelines.registry import DATASETS, spec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m data_pipelines.build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=DATASETS)
    p.add_argument("--manual_dir", default=None, help="source files (not needed for synthetic)")
    p.add_argument("--data_dir", default=None, help="output root (default $LOCOJAX_DATA_DIR or ~/.cache/locojax/datasets)")
    p.add_argument("--num_train", type=int, default=256)
    p.add_argument("--num_test", type=int, default=32)
    p.add_argument("--image_size", type=int, default=256)
    p.add_argument("--num_frames", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--normalize", default="none", choices=("none", "cameras"),
                   help="colmap/transforms: 'cameras' centres the camera centres and scales the farthest to 1 "
                        "(recorded in the dataset metadata)")
    args = p.parse_args(argv)
    try:
        return _build(p, args)
    except ValueError as e:  # users' own scenes: one line naming the file and the image
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1


def _build(p, args) -> int:
    data_dir = datasets.resolve_data_dir(args.data_dir)
    dataset = spec(args.dataset)
    if not dataset.builds_itself and args.manual_dir is None:
        p.error(f"{args.dataset} needs --manual_dir=SRC (the folder with the source files)")
    data = DataConfig.parse({"data": dict(
        synthetic_num_train_scenes=args.num_train, synthetic_num_test_scenes=args.num_test,
        synthetic_image_size=args.image_size, synthetic_num_frames=args.num_frames, synthetic_seed=args.seed,
        build_workers=args.workers)})
    builder = datasets.make_builder(args.dataset, data_dir, config=data, normalize=args.normalize)
    start = time.time()
    already = datasets.is_prepared(builder)
    if already and dataset.own_scenes:
        source = (builder.info.metadata or {}).get("source")
        if source != str(Path(args.manual_dir).resolve()):
            raise ValueError(f"{builder.data_dir} already holds the {args.dataset} import of {source}; nothing was "
                             f"changed: import {args.manual_dir} into another --data_dir (or delete that folder)")
    downloads = Path(data_dir) / "downloads"  # TFDS's download folder, made even for manual datasets
    created = [d for d in [downloads, *Path(str(builder.data_dir)).parents] if not d.exists()]
    try:
        datasets.ensure_built(args.dataset, builder, manual_dir=args.manual_dir)
    except Exception:
        for d in created:  # TFDS removed its temporary folder; drop the empty folders this build made
            if d.is_dir() and not any(p.is_file() for p in d.rglob("*")):
                shutil.rmtree(d)
        raise
    report = {"dataset": args.dataset, "data_dir": str(builder.data_dir), "already_built": already,
              "seconds": round(time.time() - start, 1),
              "splits": {k: v.num_examples for k, v in builder.info.splits.items()}}
    meta = builder.info.metadata or {}
    if "scenes" in meta:
        report["scenes"] = {k: {"frames": len(m["names"]), "image_size": m["image_size"],
                                "normalization": m["normalization"],
                                **({"point_depth_range": m["point_depth_range"]} if m.get("point_depth_range") else {})}
                            for k, m in meta["scenes"].items()}
    for key in ("skipped",):
        if key in meta:
            report[key] = meta[key]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
