"""Project 3D Gaussians into one pinhole camera, as gsplat 1.5.3's `fully_fused_projection`.

Semantics (gsplat `_torch_impl._fully_fused_projection` / `ProjectionEWA3DGSFused.cu`):
  * covariance R S S^T R^T from the normalised quaternion (w, x, y, z);
  * EWA: J from the camera-space mean whose x/z, y/z are clamped to the frustum +30% before the
    Jacobian (`_persp_proj`); the projected mean itself is unclamped K [x, y, z] / z;
  * eps2d added to the diagonal of the 2D covariance; conic = its inverse (a, b, c) with
    sigma = 0.5 (a dx^2 + c dy^2) + b dx dy;
  * culled (radius 0) when z <= near or z >= far, det <= 0, opacity < 1/255, or its bounding box
    misses the image;
  * radius = ceil(extent * sqrt(diag cov2d)) with gsplat CUDA's opacity-aware
    extent = min(3.33, sqrt(2 log(255 opacity))): outside that box opacity * exp(-sigma) < 1/255,
    so the compositor would skip the Gaussian anyway (no contribution gsplat draws is culled);
  * colour max(SH(mean - camera centre) + 0.5, 0).
Non-finite Gaussians are replaced by a harmless stand-in (opacity 0) and culled, so neither the
image nor the gradients see NaN; they are counted in `num_invalid`.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from locojax.render.sh import sh_to_color

ALPHA_THRESHOLD = 1.0 / 255.0
# float32 products at full precision on every platform: XLA's default lets GPUs use TF32 (10-bit
# mantissa) and TPUs bfloat16 passes, far from the 1e-4 gsplat parity measured on CPU.
HIGHEST = jax.lax.Precision.HIGHEST


def _mm(a, b):
    return jnp.matmul(a, b, precision=HIGHEST)


@flax.struct.dataclass
class Projected:
    """Per-camera screen-space Gaussians (leading axes allowed).

    means2d [N, 2] pixels; conics [N, 3] (a, b, c); depths [N] camera z; opacities [N];
    colors [N, 3]; radii [N, 2] int32 (0 = culled); num_invalid [] int32.
    """

    means2d: jax.Array
    conics: jax.Array
    depths: jax.Array
    opacities: jax.Array
    colors: jax.Array
    radii: jax.Array
    num_invalid: jax.Array


def quat_to_rotmat(quats):
    """[..., 4] (w, x, y, z), any length -> [..., 3, 3] rotation (gsplat `_quat_to_rotmat`)."""
    sq = jnp.sum(quats * quats, axis=-1, keepdims=True)
    # torch F.normalize: q / max(|q|, 1e-12); written so that the gradient stays finite at q = 0.
    q = quats * jax.lax.rsqrt(jnp.maximum(sq, 1e-24))
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]
    return jnp.stack(rows, axis=-1).reshape(quats.shape[:-1] + (3, 3))


def quat_scale_to_covar(quats, scales):
    """[..., 4], [..., 3] -> [..., 3, 3] covariance M M^T with M = R diag(s)."""
    m = quat_to_rotmat(quats) * scales[..., None, :]
    return jnp.einsum("...ij,...kj->...ik", m, m, precision=HIGHEST)


def sanitize_gaussians(means, quats, scales, opacities, sh):
    """Replace Gaussians with any non-finite field by an invisible stand-in.

    Returns (means, quats, scales, opacities, sh, invalid[N] bool). The double `where` keeps the
    gradients of the dropped Gaussians at exactly 0 instead of NaN.
    """
    finite = (
        jnp.all(jnp.isfinite(means), -1)
        & jnp.all(jnp.isfinite(quats), -1)
        & jnp.all(jnp.isfinite(scales), -1)
        & jnp.isfinite(opacities)
        & jnp.all(jnp.isfinite(sh), (-2, -1))
    )
    f = finite[:, None]
    means = jnp.where(f, means, 0.0)
    quats = jnp.where(f, quats, jnp.array([1.0, 0.0, 0.0, 0.0], quats.dtype))
    scales = jnp.where(f, scales, 1.0)
    opacities = jnp.where(finite, opacities, 0.0)
    sh = jnp.where(finite[:, None, None], sh, 0.0)
    return means, quats, scales, opacities, sh, ~finite


def project_gaussians(gaussians, camera, *, width: int, height: int, sh_degree: int,
                      near: float = 0.01, far: float = 1e10, eps2d: float = 0.3) -> Projected:
    """Project N Gaussians into one camera (no leading axes; vmap for more)."""
    means, quats, scales, opacities, sh, invalid = sanitize_gaussians(
        gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, gaussians.sh)
    viewmat, K = camera.viewmat, camera.K
    R, t = viewmat[:3, :3], viewmat[:3, 3]
    mean_c = _mm(means, R.T) + t  # [N, 3]
    covar_c = _mm(_mm(R, quat_scale_to_covar(quats, scales)), R.T)  # [N, 3, 3]

    z = mean_c[:, 2]
    in_depth = (z > near) & (z < far)
    # Culled Gaussians still flow through the arithmetic: a safe z keeps their (discarded) values
    # and gradients finite.
    tz = jnp.where(in_depth, z, 1.0)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    tan_fovx = 0.5 * width / fx
    tan_fovy = 0.5 * height / fy
    lim_x_pos = (width - cx) / fx + 0.3 * tan_fovx
    lim_x_neg = cx / fx + 0.3 * tan_fovx
    lim_y_pos = (height - cy) / fy + 0.3 * tan_fovy
    lim_y_neg = cy / fy + 0.3 * tan_fovy
    tx = tz * jnp.clip(mean_c[:, 0] / tz, -lim_x_neg, lim_x_pos)
    ty = tz * jnp.clip(mean_c[:, 1] / tz, -lim_y_neg, lim_y_pos)
    zeros = jnp.zeros_like(tz)
    J = jnp.stack([fx / tz, zeros, -fx * tx / (tz * tz),
                   zeros, fy / tz, -fy * ty / (tz * tz)], axis=-1).reshape(-1, 2, 3)
    cov2d = _mm(_mm(J, covar_c), jnp.swapaxes(J, -1, -2))  # [N, 2, 2]
    means2d = _mm(mean_c, K[:2, :3].T) / tz[:, None]

    c00 = cov2d[:, 0, 0] + eps2d
    c11 = cov2d[:, 1, 1] + eps2d
    c01 = 0.5 * (cov2d[:, 0, 1] + cov2d[:, 1, 0])
    det = c00 * c11 - c01 * c01
    ok_det = det > 0.0
    det_safe = jnp.where(ok_det, det, 1.0)
    conics = jnp.stack([c11 / det_safe, -c01 / det_safe, c00 / det_safe], axis=-1)

    # Opacity-aware extent (gsplat CUDA; arXiv 2402.00525 B.2); non-differentiable, like gsplat.
    op = jax.lax.stop_gradient(opacities)
    visible_op = op >= ALPHA_THRESHOLD
    extent = jnp.minimum(3.33, jnp.sqrt(2.0 * jnp.log(jnp.maximum(op, ALPHA_THRESHOLD) / ALPHA_THRESHOLD)))
    cs = jax.lax.stop_gradient(jnp.stack([c00, c11], -1))
    radius = jnp.ceil(extent[:, None] * jnp.sqrt(jnp.maximum(cs, 0.0)))  # [N, 2]
    m2 = jax.lax.stop_gradient(means2d)
    inside = ((m2[:, 0] + radius[:, 0] > 0) & (m2[:, 0] - radius[:, 0] < width)
              & (m2[:, 1] + radius[:, 1] > 0) & (m2[:, 1] - radius[:, 1] < height))
    keep = in_depth & ok_det & visible_op & inside & ~invalid & jnp.all(jnp.isfinite(m2), -1)
    radii = jnp.where(keep[:, None], radius, 0.0).astype(jnp.int32)

    cam_centre = jnp.linalg.inv(viewmat)[:3, 3]  # gsplat: torch.inverse(viewmats)[..., :3, 3]
    colors = sh_to_color(sh_degree, sh, means - cam_centre)
    return Projected(means2d=means2d, conics=conics, depths=z, opacities=opacities,
                     colors=colors, radii=radii, num_invalid=jnp.sum(invalid).astype(jnp.int32))
