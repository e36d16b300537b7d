"""Real spherical harmonics with gsplat 1.5.3's constants and coefficient ordering.

gsplat evaluates the bases of Sloan, "Efficient Spherical Harmonic Evaluation" (JCGT 2013) at the
*normalised* direction `mean - camera_centre`, and the renderer turns SH into colour as
`max(SH(dir) + 0.5, 0)` (gsplat `rendering.py`). Coefficients are [..., K, 3] with K = (degree + 1)**2,
DC first; only the first (sh_degree + 1)**2 are used.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sh_bases(degree: int, dirs):
    """Sloan's real SH bases in gsplat's order.

    Args:
      degree: 0..4, static.
      dirs: [..., 3] unit directions.
    Returns:
      [..., (degree + 1)**2] basis values.
    """
    if not 0 <= degree <= 4:
        raise ValueError(f"sh_degree must be in 0..4, got {degree}")
    x, y, z = dirs[..., 0], dirs[..., 1], dirs[..., 2]
    out = [None] * ((degree + 1) ** 2)
    out[0] = jnp.full_like(x, 0.2820947917738781)
    if degree >= 1:
        a = -0.48860251190292
        out[1] = a * y
        out[2] = -a * z
        out[3] = a * x
    if degree >= 2:
        z2 = z * z
        b = -1.092548430592079 * z
        a = 0.5462742152960395
        c1 = x * x - y * y
        s1 = 2 * x * y
        out[4] = a * s1
        out[5] = b * y
        out[6] = 0.9461746957575601 * z2 - 0.3153915652525201
        out[7] = b * x
        out[8] = a * c1
    if degree >= 3:
        c = -2.285228997322329 * z2 + 0.4570457994644658
        b = 1.445305721320277 * z
        a = -0.5900435899266435
        c2 = x * c1 - y * s1
        s2 = x * s1 + y * c1
        out[9] = a * s2
        out[10] = b * s1
        out[11] = c * y
        out[12] = z * (1.865881662950577 * z2 - 1.119528997770346)
        out[13] = c * x
        out[14] = b * c1
        out[15] = a * c2
    if degree >= 4:
        d = z * (-4.683325804901025 * z2 + 2.007139630671868)
        c = 3.31161143515146 * z2 - 0.47308734787878
        b = -1.770130769779931 * z
        a = 0.6258357354491763
        c3 = x * c2 - y * s2
        s3 = x * s2 + y * c2
        out[16] = a * s3
        out[17] = b * s2
        out[18] = c * s1
        out[19] = d * y
        out[20] = 1.984313483298443 * z2 * (1.865881662950577 * z2 - 1.119528997770346) + (
            -1.006230589874905 * (0.9461746957575601 * z2 - 0.3153915652525201)
        )
        out[21] = d * x
        out[22] = c * c1
        out[23] = b * c2
        out[24] = a * c3
    return jnp.stack(out, axis=-1)


def safe_normalize(v, eps: float = 1e-12):
    """v / max(|v|, eps) along the last axis (torch's F.normalize) with a finite gradient at 0."""
    sq = jnp.sum(v * v, axis=-1, keepdims=True)
    return v * jnp.where(sq > eps * eps, jnp.reciprocal(jnp.sqrt(jnp.maximum(sq, eps * eps))), 1.0 / eps)


def sh_to_color(degree: int, sh, dirs):
    """Colour of each Gaussian seen along `dirs`.

    Args:
      degree: SH degree to evaluate (static); sh must have at least (degree + 1)**2 coefficients.
      sh: [..., K, 3] coefficients.
      dirs: [..., 3] un-normalised view directions (mean - camera centre).
    Returns:
      [..., 3] colour max(sum_k basis_k * sh_k + 0.5, 0).
    """
    num = (degree + 1) ** 2
    if sh.shape[-2] < num:
        raise ValueError(f"sh has {sh.shape[-2]} coefficients; sh_degree={degree} needs {num}")
    bases = sh_bases(degree, safe_normalize(dirs))  # [..., num]
    # HIGHEST: float32 on GPUs/TPUs too (their default TF32 / bfloat16 passes break gsplat parity).
    rgb = jnp.einsum("...k,...kc->...c", bases, sh[..., :num, :], precision=jax.lax.Precision.HIGHEST)
    return jnp.maximum(rgb + 0.5, 0.0)
