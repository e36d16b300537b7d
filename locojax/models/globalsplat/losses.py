"""GlobalSplat's objective (paper sec. 3.5 and appendix 0.B.3, official `model_wrapper.py`).

    L_subset = L_ren + L_reg                         (eq. 50)
    L_ren    = 2 MSE + 1 LPIPS                       (eq. 37, Table 6)
    L_reg    = 1e-2 L_fru + 1e-2 L_dec               (eq. 41; L_dec: eqs. 44-48)
    L        = (L_subset^a + L_subset^b) / 2 + 1e-3 L_con^alpha + 1e-2 L_con^depth   (eqs. 38-40, 49)

The rendering terms are the family-neutral `locojax.losses.mse` / `locojax.losses.lpips`; this
module holds GlobalSplat's own regularisers and consistency loss (weights: `config.loss` of
`configs/globalsplat.py`). Every function returns a scalar mean; `weights` arguments ([B, N],
1 = real Gaussian) let the curriculum's zero-opacity padding copies (see
`locojax.models.globalsplat.decoder`) drop out of per-Gaussian means, so each stage's loss equals
the official one on its unpadded output.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def _masked_mean(x, weights=None):
    if weights is None:
        return jnp.mean(x)
    weights = jnp.broadcast_to(weights.astype(x.dtype), x.shape)
    return jnp.sum(x * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def frustum_loss(means, K_pixels, w2c, height: int, width: int, *, weights=None, tau: float = 10.0,
                 max_depth: float = 100.0, near: float = 1e-2, eps: float = 1e-6):
    """Eq. 42 (official `frustum_soft_loss_w2c`): mean_n log(1 + v_n / tau), v_n the smallest over
    input views of the summed violations of u in [0, W-1], v in [0, H-1], z >= near, z <= max_depth.

    Args:
      means: [B, N, 3]; K_pixels: [B, V, 3, 3] pixel intrinsics; w2c: [B, V, 4, 4];
      weights: optional [B, N] (padding copies 0).
    """
    cam = jnp.einsum("bvij,bnj->bvni", w2c[..., :3, :3], means) + w2c[:, :, None, :3, 3]
    z = cam[..., 2]
    img = jnp.einsum("bvij,bvnj->bvni", K_pixels, cam)
    zs = jnp.maximum(img[..., 2], eps)
    u, v = img[..., 0] / zs, img[..., 1] / zs
    relu = jax.nn.relu
    violation = (relu(-u) + relu(u - (width - 1)) + relu(-v) + relu(v - (height - 1))
                 + relu(near - z) + relu(z - max_depth))
    return _masked_mean(jnp.log1p(jnp.min(violation, axis=1) / tau), weights)


def opacity_regularizer(opacities, *, alpha_max: float = 0.2, weights=None, eps: float = 1e-6):
    """Eqs. 44-45: mean(alpha) + mean(max(o - t, 0)^2), t = logit(alpha_max), o = logit(alpha).

    Not part of the official decoder's `reg` (that one has scale, rotation and SH only); added here
    because the paper lists it in L_dec. opacities: [B, N] in [0, 1]."""
    t = math.log(alpha_max / (1.0 - alpha_max))
    a = jnp.clip(opacities, eps, 1.0 - eps)
    logit = jnp.log(a) - jnp.log1p(-a)
    return _masked_mean(opacities, weights) + _masked_mean(jax.nn.relu(logit - t) ** 2, weights)


def scale_regularizer(log_scales, log_scale_max: float = math.log(0.05)):
    """Eq. 46: mean(max(log s - log s_max, 0)^2) over the raw (pre-clamp) candidate log-scales."""
    return jnp.mean(jax.nn.relu(log_scales - log_scale_max) ** 2)


def rotation_regularizer(rot6_residuals):
    """Eq. 47: mean squared raw 6D residual (the official `.pow(2).mean()`: over all 6 values)."""
    return jnp.mean(rot6_residuals ** 2)


def sh_softcap_regularizer(sh, cap: float = 5.0, tau: float = 1.0, p: float = 2.0):
    """Eq. 48: E[(softplus((|c| - cap) / tau) tau)^p]."""
    return jnp.mean((jax.nn.softplus((jnp.abs(sh) - cap) / tau) * tau) ** p)


def consistency_losses(alpha_a, alpha_b, depth_a, depth_b, *, support: float = 1e-2):
    """Eqs. 39-40 with symmetric stop-gradients: returns (L_con^alpha, L_con^depth).

    alpha_*, depth_*: rendered accumulation / expected depth of the two subsets' scenes on the same
    target views, any equal shapes. The depth term is restricted to the support Omega where both
    alphas exceed `support` (official: 1e-2), normalised by |Omega| (at least 1)."""
    sg = jax.lax.stop_gradient
    alpha_a, alpha_b = alpha_a.astype(jnp.float32), alpha_b.astype(jnp.float32)
    depth_a, depth_b = depth_a.astype(jnp.float32), depth_b.astype(jnp.float32)
    l_alpha = 0.5 * jnp.mean(jnp.abs(alpha_a - sg(alpha_b))) + 0.5 * jnp.mean(jnp.abs(alpha_b - sg(alpha_a)))
    omega = sg(((alpha_a > support) & (alpha_b > support)).astype(jnp.float32))
    denom = jnp.maximum(jnp.sum(omega), 1.0)
    l_depth = (0.5 * jnp.sum(jnp.abs(depth_a - sg(depth_b)) * omega) / denom
               + 0.5 * jnp.sum(jnp.abs(depth_b - sg(depth_a)) * omega) / denom)
    return l_alpha, l_depth
