"""Trace-time checks of the rasterizer's inputs: wrong shapes or dtypes fail with the argument's name
and the expected shape (the arrays themselves are never inspected, so this is free under jit)."""

from __future__ import annotations

import jax.numpy as jnp


def _check(name, x, expected, what):
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name} must be an array of shape {what}, got {type(x).__name__}")
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{name} must be floating point (float32), got dtype {dtype}")
    if len(shape) != len(expected) or any(e is not None and s != e for s, e in zip(shape, expected)):
        raise ValueError(f"{name} must have shape {what}, got {tuple(shape)}")


def check_inputs(gaussians, camera, *, sh_degree: int, background, batch_dims: int, num_views=None):
    """Validate Gaussians [*B, N, ...] and Camera [*B, (V,) 4, 4] with `batch_dims` leading axes B."""
    means = gaussians.means
    if getattr(means, "ndim", 0) != batch_dims + 2:
        raise ValueError(f"gaussians.means must have shape {'[S, ' if batch_dims else '['}N, 3], "
                         f"got {tuple(getattr(means, 'shape', ()))}")
    lead = tuple(means.shape[:batch_dims])
    n = means.shape[batch_dims]
    b = "".join(f"{d}, " for d in lead)
    need_k = (sh_degree + 1) ** 2
    if not isinstance(sh_degree, int) or sh_degree < 0 or sh_degree > 4:
        raise ValueError(f"sh_degree must be a Python int in 0..4, got {sh_degree!r}")
    _check("gaussians.means", means, lead + (n, 3), f"[{b}N, 3]")
    _check("gaussians.quats", gaussians.quats, lead + (n, 4), f"[{b}N={n}, 4]")
    _check("gaussians.scales", gaussians.scales, lead + (n, 3), f"[{b}N={n}, 3]")
    _check("gaussians.opacities", gaussians.opacities, lead + (n,), f"[{b}N={n}]")
    _check("gaussians.sh", gaussians.sh, lead + (n, None, 3), f"[{b}N={n}, K>={need_k}, 3]")
    if gaussians.sh.shape[-2] < need_k:
        raise ValueError(f"gaussians.sh must have shape [{b}N={n}, K>={need_k}, 3] for "
                         f"sh_degree={sh_degree}, got {tuple(gaussians.sh.shape)}")
    vlead = lead + ((num_views,) if num_views is not None else ())
    vb = b + ("V, " if num_views is not None else "")
    _check("camera.viewmat", camera.viewmat, vlead + (4, 4), f"[{vb}4, 4]")
    _check("camera.K", camera.K, vlead + (3, 3), f"[{vb}3, 3]")
    if background is not None:
        _check("background", background, (3,), "[3]")
