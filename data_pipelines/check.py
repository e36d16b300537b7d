"""Convention check of a built scene: are its cameras right?

    python -m data_pipelines.check --data_dir=OUT --dataset=NAME --scene=KEY [--pairs=3] [--out=FILE.png]

Writes one picture (default `OUT/checks/<dataset>_<scene>.png`) and prints one JSON line:

* For `--pairs` view pairs, points are marked on the first view (SIFT features matched to the second
  view by mutual nearest neighbour and Lowe's ratio test, `pycolmap.Sift`) and their epipolar lines,
  from the stored cameras, are drawn on the second view in the same colours. With right cameras each
  line passes through its point's match; `epipolar_error_px` is the median distance (pixels) of the
  matches from their lines, both ways (Hartley & Zisserman, 2nd ed., sec. 9.2: x'^T F x = 0 with
  F = K'^-T [t]x R K^-1).
* Scenes imported from COLMAP carry their sparse points: each is projected into the frames that
  observed it (red) next to its observation (green), and `reprojection_error_px` is the mean distance.

A flipped axis, a transposed rotation, OpenGL poses read as OpenCV or intrinsics not normalised by the
image size move the lines and the projections by many pixels; a right scene stays around a pixel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

COLOURS = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
           (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212)]


def pixel_intrinsics(K_norm: np.ndarray, width: int, height: int) -> np.ndarray:
    """[..., 3, 3] normalised intrinsics -> pixels (pixel centres at u + 0.5)."""
    return np.asarray(K_norm, np.float64) * np.array([[width], [height], [1.0]])


def reprojection_errors(c2w: np.ndarray, K_norm: np.ndarray, width: int, height: int, points) -> np.ndarray:
    """Distance (pixels) between each sparse point's projection and its observation.

    Args:
      c2w:    [N, 4, 4] OpenCV camera-to-world.
      K_norm: [N, 3, 3] normalised intrinsics.
      width, height: image size in pixels.
      points: `SparsePoints` (observations as (frame, point, x / W, y / H)).
    Returns:
      [M] float64 errors, one per observation (inf for a point behind its camera).
    """
    obs = points.observations
    frames, idx = obs[:, 0].astype(np.int64), obs[:, 1].astype(np.int64)
    w2c = np.linalg.inv(np.asarray(c2w, np.float64))[frames]
    pc = np.einsum("mij,mj->mi", w2c[:, :3, :3], points.xyz[idx]) + w2c[:, :3, 3]
    K = pixel_intrinsics(K_norm, width, height)[frames]
    pix = np.einsum("mij,mj->mi", K, pc)
    with np.errstate(divide="ignore", invalid="ignore"):
        proj = pix[:, :2] / pix[:, 2:]
    err = np.linalg.norm(proj - obs[:, 2:] * np.array([width, height]), axis=-1)
    return np.where(pc[:, 2] > 0, err, np.inf)


def fundamental_matrix(c2w_a, K_a, c2w_b, K_b) -> np.ndarray:
    """F with x_b^T F x_a = 0 for pixel coordinates (pixel intrinsics K_a, K_b; OpenCV c2w)."""
    rel = np.linalg.inv(np.asarray(c2w_b, np.float64)) @ np.asarray(c2w_a, np.float64)  # cam a -> cam b
    R, t = rel[:3, :3], rel[:3, 3]
    tx = np.array([[0.0, -t[2], t[1]], [t[2], 0.0, -t[0]], [-t[1], t[0], 0.0]])
    return np.linalg.inv(K_b).T @ tx @ R @ np.linalg.inv(K_a)


def epipolar_distances(F: np.ndarray, xa: np.ndarray, xb: np.ndarray) -> np.ndarray:
    """[M] symmetric point-to-epipolar-line distances (mean of both ways) for matches xa <-> xb [M, 2]."""
    ha = np.concatenate([xa, np.ones((len(xa), 1))], axis=1)
    hb = np.concatenate([xb, np.ones((len(xb), 1))], axis=1)
    lb = ha @ F.T   # lines in b
    la = hb @ F     # lines in a
    db = np.abs(np.sum(lb * hb, axis=1)) / np.maximum(np.linalg.norm(lb[:, :2], axis=1), 1e-12)
    da = np.abs(np.sum(la * ha, axis=1)) / np.maximum(np.linalg.norm(la[:, :2], axis=1), 1e-12)
    return 0.5 * (da + db)


def sift_matches(image_a: np.ndarray, image_b: np.ndarray, ratio: float = 0.8):
    """Mutual nearest-neighbour SIFT matches passing Lowe's ratio test: xa, xb [M, 2] pixels
    (COLMAP's keypoint convention: the top-left corner of the image is (0, 0), as here)."""
    import pycolmap

    sift = pycolmap.Sift(device=pycolmap.Device.cpu)

    def extract(image):
        gray = np.ascontiguousarray((np.asarray(image, np.float32) @ [0.299, 0.587, 0.114]) / 255.0, np.float32)
        kp, desc = sift.extract(gray)
        return np.asarray(kp)[:, :2], np.asarray(desc, np.float32)

    ka, da = extract(image_a)
    kb, db = extract(image_b)
    if len(ka) < 2 or len(kb) < 2:
        return np.zeros((0, 2)), np.zeros((0, 2))
    da = da / np.maximum(np.linalg.norm(da, axis=1, keepdims=True), 1e-12)
    db = db / np.maximum(np.linalg.norm(db, axis=1, keepdims=True), 1e-12)
    dist = np.sqrt(np.maximum(2.0 - 2.0 * da @ db.T, 0.0))
    order = np.argsort(dist, axis=1)
    best, second = order[:, 0], order[:, 1]
    rows = np.arange(len(ka))
    keep = dist[rows, best] < ratio * dist[rows, second]
    keep &= np.argmin(dist, axis=0)[best] == rows
    return ka[keep], kb[best[keep]]


def view_pairs(c2w: np.ndarray, count: int) -> list:
    """`count` pairs (i, j): frames spread over the scene, each with its nearest other camera centre."""
    n = len(c2w)
    centres = c2w[:, :3, 3]
    firsts = sorted(set(np.linspace(0, n - 1, count).round().astype(int).tolist()))
    pairs = []
    for i in firsts:
        d = np.linalg.norm(centres - centres[i], axis=-1)
        d[i] = np.inf
        pairs.append((i, int(np.argmin(d))))
    return pairs


def _line_ends(line, width, height):
    a, b, c = line
    pts = []
    if abs(b) > 1e-12:
        for x in (0.0, float(width)):
            pts.append((x, -(a * x + c) / b))
    if abs(a) > 1e-12:
        for y in (0.0, float(height)):
            pts.append((-(b * y + c) / a, y))
    inside = [p for p in pts if -1 <= p[0] <= width + 1 and -1 <= p[1] <= height + 1]
    return inside[:2] if len(inside) >= 2 else None


def _canvas(image: np.ndarray, scale: int):
    h, w = image.shape[:2]
    return Image.fromarray(image).resize((w * scale, h * scale), Image.NEAREST)


def _dot(draw, xy, scale, colour, r=3):
    x, y = xy[0] * scale, xy[1] * scale
    draw.ellipse([x - r, y - r, x + r, y + r], outline=colour, width=2)


def check_scene(scene, points=None, num_pairs: int = 3, marks: int = 10) -> tuple[Image.Image, dict]:
    """The check picture and its numbers for one `Scene` (and optional `SparsePoints`).

    Returns:
      (picture, report): report has epipolar_error_px (median over all matches), num_matches,
      pairs, and with points reprojection_error_px (mean) and num_observations.
    """
    images = scene.images
    n, h, w = images.shape[:3]
    scale = max(1, int(np.ceil(256 / max(h, w))))
    c2w = np.asarray(scene.c2w, np.float64)
    K = pixel_intrinsics(scene.intrinsics, w, h)
    rows, all_dist = [], []
    pairs = view_pairs(c2w, num_pairs)
    for i, j in pairs:
        xa, xb = sift_matches(images[i], images[j])
        F = fundamental_matrix(c2w[i], K[i], c2w[j], K[j])
        if len(xa):
            all_dist.append(epipolar_distances(F, xa, xb))
        left, right = _canvas(images[i], scale), _canvas(images[j], scale)
        dl, dr = ImageDraw.Draw(left), ImageDraw.Draw(right)
        shown = np.linspace(0, len(xa) - 1, min(marks, len(xa))).round().astype(int) if len(xa) else []
        for k, m in enumerate(shown):
            colour = COLOURS[k % len(COLOURS)]
            _dot(dl, xa[m], scale, colour)
            _dot(dr, xb[m], scale, colour)
            ends = _line_ends(F @ np.array([xa[m][0], xa[m][1], 1.0]), w, h)
            if ends:
                dr.line([(ends[0][0] * scale, ends[0][1] * scale), (ends[1][0] * scale, ends[1][1] * scale)],
                        fill=colour, width=1)
        dl.text((4, 4), f"frame {i}: marked points", fill=(255, 255, 255))
        dr.text((4, 4), f"frame {j}: their epipolar lines", fill=(255, 255, 255))
        rows.append([left, right])
    report = {"scene": scene.key, "pairs": pairs,
              "num_matches": int(sum(len(d) for d in all_dist)),
              "epipolar_error_px": float(np.median(np.concatenate(all_dist))) if all_dist else None}
    if points is not None and len(points.observations):
        err = reprojection_errors(c2w, scene.intrinsics, w, h, points)
        front = np.isfinite(err)
        # A point behind the camera that observed it has no projection: counted apart (a flipped z axis
        # puts every point behind).
        report["reprojection_error_px"] = float(np.mean(err[front])) if front.any() else None
        report["fraction_behind_camera"] = float(1.0 - front.mean())
        report["num_observations"] = int(len(err))
        shown_frames = sorted(set(np.linspace(0, n - 1, 2 * num_pairs).round().astype(int).tolist()))
        obs = points.observations
        tiles = []
        for f in shown_frames:
            tile = _canvas(images[f], scale)
            draw = ImageDraw.Draw(tile)
            sel = obs[:, 0] == f
            w2c = np.linalg.inv(c2w[f])
            pc = points.xyz[obs[sel, 1].astype(int)] @ w2c[:3, :3].T + w2c[:3, 3]
            pix = pc @ K[f].T
            with np.errstate(divide="ignore", invalid="ignore"):
                proj = pix[:, :2] / pix[:, 2:]
            seen = obs[sel, 2:] * [w, h]
            for p, q in zip(proj, seen):
                if np.isfinite(p).all():
                    draw.line([(q[0] * scale, q[1] * scale), (p[0] * scale, p[1] * scale)], fill=(255, 255, 0))
                    _dot(draw, p, scale, (255, 0, 0), 2)
                _dot(draw, q, scale, (0, 255, 0), 2)
            frame_err = float(np.mean(err[sel & np.isfinite(err)])) if (sel & np.isfinite(err)).any() else float("nan")
            draw.text((4, 4), f"frame {f}: sparse points, mean error {frame_err:.2f} px", fill=(255, 255, 255))
            tiles.append(tile)
        for k in range(0, len(tiles), 2):
            rows.append(tiles[k:k + 2])
    tile_w, tile_h = w * scale, h * scale
    picture = Image.new("RGB", (2 * tile_w, max(1, len(rows)) * tile_h + 24), (0, 0, 0))
    for r, row in enumerate(rows):
        for c, tile in enumerate(row):
            picture.paste(tile, (c * tile_w, 24 + r * tile_h))
    title = f"{scene.key}: epipolar {report['epipolar_error_px'] if report['epipolar_error_px'] is None else round(report['epipolar_error_px'], 2)} px"
    if "reprojection_error_px" in report:
        rep = report["reprojection_error_px"]
        title += (f", reprojection {'-' if rep is None else f'{rep:.2f}'} px, "
                  f"{100 * report['fraction_behind_camera']:.0f}% of points behind their camera")
    ImageDraw.Draw(picture).text((4, 6), title, fill=(255, 255, 255))
    return picture, report


def scene_points(dataset: str, builder, key: str):
    """The imported sparse points of scene `key` (COLMAP imports: `DatasetSpec.sparse_points`), else None."""
    from data_pipelines.registry import spec

    if not spec(dataset).sparse_points:
        return None
    from data_pipelines.builders.own_scenes import scene_metadata
    from data_pipelines.readers.posed_images import SparsePoints

    meta = scene_metadata(builder, key)
    return SparsePoints.from_json(meta["points"]) if "points" in meta else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m data_pipelines.check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_dir", default=None)
    p.add_argument("--dataset", required=True)
    p.add_argument("--scene", required=True, help="scene key")
    p.add_argument("--split", default="test")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--out", default=None, help="picture path (default DATA_DIR/checks/<dataset>_<scene>.png)")
    args = p.parse_args(argv)
    from data_pipelines import datasets
    from data_pipelines.errors import DatasetError
    from data_pipelines.loading import open_split

    try:
        data_dir = datasets.resolve_data_dir(args.data_dir)
        datasets.check_dataset(args.dataset)
        builder = datasets.make_builder(args.dataset, data_dir)
        if not datasets.is_prepared(builder):
            raise ValueError(f"dataset {args.dataset!r} is not built under {builder.data_dir}")
        source = open_split(args.dataset, args.split, data_dir)
        if args.scene not in source.index_of:
            raise ValueError(f"{builder.data_dir}: no scene {args.scene!r} in split {args.split!r} "
                             f"(have {', '.join(source.keys[:10])}{'...' if len(source) > 10 else ''})")
        scene = source.scene(source.index_of[args.scene], with_depth=False)
        points = scene_points(args.dataset, builder, args.scene)
    except (DatasetError, ValueError, KeyError) as e:
        print(f"error: {str(e).strip(chr(39))}", file=sys.stderr)
        return 1
    picture, report = check_scene(scene, points, args.pairs)
    out = Path(args.out) if args.out else Path(data_dir) / "checks" / f"{args.dataset}_{args.scene}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    picture.save(out)
    report["picture"] = str(out)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
