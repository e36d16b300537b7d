"""Compositing backend dispatcher: one entry point for every implementation of
`composite_tiles(table, ids, starts, limits, origins, tile_size, width, height, chunk)`.

    rgbz, t_final = composite(table, ids, starts, limits, origins, tile_size, width, height, chunk,
                              backend="auto")

The platform is chosen when the computation is lowered (`jax.lax.platform_dependent`), never from
`jax.default_backend()` at trace time: a module exported for cuda on a CPU host carries the cuda
choice, and a multi-platform export carries one branch per platform, resolved just before
compilation.

| backend  | cpu                         | cuda          | tpu                          | other              |
|----------|-----------------------------|---------------|------------------------------|--------------------|
| "auto"   | XLA, early exit             | Triton (**)   | Mosaic kernel (***)          | XLA, static trips  |
| "xla"    | XLA, early exit             | XLA, static   | XLA, static trip count       | XLA, static trips  |
| "pallas" | Triton kernel, interpreted  | Triton kernel | Mosaic kernel                | Triton, interpreted|

(**) on jax >= 0.9.1 and tables below 2^27 rows; otherwise XLA, static trip count ("pallas" raises
there, naming the version or the row count).
Mosaic kernel: `locojax.render.pallas.mosaic_composite` (lowered for TPU from CPU; not yet compiled
or run on a TPU, see docs/rasterizer_backends.md). (***) while its padded lists (M + 128 R slots) stay
below 2^31; otherwise XLA, static trip count ("pallas" raises there, naming the keys).
Why: XLA:CPU runs the data-dependent while loops of `composite_tiles` natively and fastest; XLA:GPU
copies a data-dependent loop condition to the host at every iteration (openxla/xla while_thunk.cc),
so accelerators get either a kernel that loops on the device or the static-trip-count variant.
"""

from __future__ import annotations

from functools import partial

import jax

from locojax.render.composite import composite_tiles

BACKENDS = ("auto", "xla", "pallas")


def _xla(early_exit, table, ids, starts, limits, origins, *, statics, max_count=None):
    return composite_tiles(table, ids, starts, limits, origins, *statics, early_exit=early_exit, max_count=max_count)


def _triton(interpret, table, ids, starts, limits, origins, *, statics):
    from locojax.render.pallas.triton_composite import composite_tiles_triton

    return composite_tiles_triton(table, ids, starts, limits, origins, *statics, interpret=interpret)


def _tpu_kernel(table, ids, starts, limits, origins, *, statics, max_count=None):
    # The Mosaic kernels walk exactly each row's chunks (trip counts on the device): no max_count.
    del max_count
    from locojax.render.pallas.mosaic_composite import composite_tiles_mosaic

    return composite_tiles_mosaic(table, ids, starts, limits, origins, *statics, interpret=False)


def _branches(backend: str, statics, max_count=None, table_rows=0, list_shape=(0, 0)) -> dict:
    from locojax.render.pallas.mosaic_composite import mosaic_fits
    from locojax.render.pallas.triton_composite import triton_fits, triton_supported

    xla_fast = partial(_xla, True, statics=statics)
    xla_static = partial(_xla, False, statics=statics, max_count=max_count)
    tpu = partial(_tpu_kernel, statics=statics, max_count=max_count)
    if backend == "auto" and not mosaic_fits(*list_shape, statics[3]):
        tpu = xla_static  # padded lists past int32 slots: "pallas" raises, naming the keys
    if backend == "auto":
        # Every branch is traced whatever the platform: on a jax without Pallas Triton routing
        # (< 0.9.1), or for a table past the kernels' int32 offsets, "auto" keeps the XLA path on
        # cuda instead of failing on CPU hosts too.
        use_triton = triton_supported() and triton_fits(table_rows)
        cuda = partial(_triton, False, statics=statics) if use_triton else xla_static
        return dict(cpu=xla_fast, cuda=cuda, tpu=tpu, default=xla_static)
    if backend == "xla":
        return dict(cpu=xla_fast, default=xla_static)
    if backend == "pallas":
        interpreted = partial(_triton, True, statics=statics)
        return dict(cpu=interpreted, cuda=partial(_triton, False, statics=statics), tpu=tpu,
                    default=interpreted)
    raise ValueError(f"compositing backend={backend!r}: expected one of {', '.join(map(repr, BACKENDS))}")


def composite(table, ids, starts, limits, origins, tile_size, width, height, chunk, backend="auto", *,
              max_count=None):
    """Blend tile lists with the implementation `backend` selects for the platform being lowered.

    Args:
      table: [N + 1, 10] float32 packed attributes, last row an opacity-0 sentinel.
      ids: [M] int32 Gaussian ids; row r's list is ids[starts[r] : starts[r] + limits[r]], nearest first.
      starts, limits: [R] int32. origins: [R, 2] int32 pixel (x, y) of each row's tile.
      tile_size, width, height, chunk: static ints.
      backend: "auto", "xla" or "pallas" (see the module table).
      max_count: static bound on `limits` (the tile capacity): the static trip count of the XLA
        variant without early exit is ceil(max_count / chunk) (default M: safe but slow).
    Returns:
      rgbz [4, R, P] and t_final [R, P], P = tile_size**2; differentiable w.r.t. `table`.
    """
    branches = _branches(backend, (int(tile_size), int(width), int(height), int(chunk)),
                         None if max_count is None else int(max_count), table.shape[0],
                         (ids.shape[0], starts.shape[0]))
    return jax.lax.platform_dependent(table, ids, starts, limits, origins, **branches)
