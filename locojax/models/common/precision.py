"""Per-module compute dtypes.

A family names its parts (e.g. LoCoSplat: "image" for the ViT/CNN side, "geometry" for depth,
warping and the 3D stage) and reads each part's dtype from its config, falling back to the
run-wide `config.precision`:

    policy = PrecisionPolicy.from_config(config.model.get("precision", {}), default=config.precision)
    policy.dtype("image")      # jnp.bfloat16
    policy.dtype("geometry")   # jnp.float32

Parameters stay float32 (flax `param_dtype`); a module computes in its part's dtype. Gaussians,
cameras and the rasteriser are always float32 (the trainer casts the model's output).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax.numpy as jnp

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def dtype_from_name(name: str, key: str = "precision") -> Any:
    if str(name) not in DTYPES:
        raise ValueError(f"config.{key}={name!r}: expected one of {sorted(DTYPES)}")
    return DTYPES[str(name)]


@dataclasses.dataclass(frozen=True)
class PrecisionPolicy:
    default: str = "float32"
    parts: tuple = ()  # ((part name, dtype name), ...)

    @classmethod
    def from_config(cls, parts: Mapping[str, str] | None, default: str = "float32") -> "PrecisionPolicy":
        dtype_from_name(default)
        items = tuple(sorted((str(k), str(v)) for k, v in dict(parts or {}).items()))
        for k, v in items:
            dtype_from_name(v, f"model.precision.{k}")
        return cls(str(default), items)

    def dtype(self, part: str) -> Any:
        return DTYPES[dict(self.parts).get(part, self.default)]
