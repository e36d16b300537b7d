"""Rendering (photometric) losses of the three papers. Pure functions; weights are arguments.

* LoCoSplat (paper 000, eq. 6): l = MSE + lambda * LPIPS, lambda = 0.05 (DepthSplat/VolSplat recipe),
  applied to the final-depth render and, weighted beta = 0.9, to the coarse-depth render.
* GlobalSplat (paper 001, eq. 37 and its Table of weights): lambda_mse * MSE + lambda_perc * LPIPS with
  lambda_mse = 2, lambda_perc = 1.
* LocusGS / TokenGS (paper 002, eq. 26): MSE + lambda_SSIM * L_SSIM with lambda_SSIM = 0.2 and
  L_SSIM = 1 - SSIM. (TokenGS's released code uses (1 - SSIM) / 2, i.e. `dssim_scale=0.5`.)

MSE is the mean over every pixel, channel, view and scene (as pixelSplat's LossMse, so "||.||_2^2" in
the papers is a mean); LPIPS is lpips(pred, target) averaged over images; SSIM is `metrics.ssim`
(the pixelSplat/skimage SSIM, 'valid' 11x11 Gaussian windows) averaged over images.
All take images [..., H, W, 3] and return (scalar loss, dict of scalar terms for logging).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from locojax.metrics.lpips import lpips as lpips_metric
from locojax.metrics.ssim import ssim as ssim_metric

# Paper defaults, for configs to copy.
LOCOSPLAT = {"kind": "mse_lpips", "lambda_mse": 1.0, "lambda_lpips": 0.05}
GLOBALSPLAT = {"kind": "mse_lpips", "lambda_mse": 2.0, "lambda_lpips": 1.0}
LOCUSGS = {"kind": "mse_ssim", "lambda_mse": 1.0, "lambda_ssim": 0.2, "dssim_scale": 1.0}
LOCOSPLAT_COARSE_BETA = 0.9  # paper 000 eq. 6: weight of the coarse-depth render's loss


def _is_static_zero(weight) -> bool:
    """A Python-number zero weight skips its term; array weights (e.g. a traced schedule) never do."""
    return isinstance(weight, (int, float)) and weight == 0


def mse(pred, target):
    """Mean squared error over all elements -> scalar."""
    return jnp.mean((pred.astype(jnp.float32) - target.astype(jnp.float32)) ** 2)


def mse_lpips_loss(pred, target, *, lambda_mse: float = 1.0, lambda_lpips: float = 0.05, lpips_params=None,
                   lpips_precision=jax.lax.Precision.HIGHEST):
    """lambda_mse * MSE + lambda_lpips * mean LPIPS (LoCoSplat: 1, 0.05; GlobalSplat: 2, 1).

    LPIPS gradients reach `pred` only (the target trunk runs under stop_gradient). A zero weight skips
    the term entirely (no VGG pass); weights may also be traced arrays (schedules). `lpips_precision=jax.lax.Precision.DEFAULT` allows TF32 on GPUs.
    """
    terms = {"mse": mse(pred, target)}
    loss = lambda_mse * terms["mse"]
    if not _is_static_zero(lambda_lpips):
        terms["lpips"] = jnp.mean(lpips_metric(pred, target, params=lpips_params, precision=lpips_precision))
        loss = loss + lambda_lpips * terms["lpips"]
    return loss, terms


def mse_ssim_loss(pred, target, *, lambda_mse: float = 1.0, lambda_ssim: float = 0.2, dssim_scale: float = 1.0):
    """lambda_mse * MSE + lambda_ssim * dssim_scale * (1 - mean SSIM) (LocusGS/TokenGS eq. 26)."""
    terms = {"mse": mse(pred, target)}
    loss = lambda_mse * terms["mse"]
    if not _is_static_zero(lambda_ssim):
        terms["ssim"] = jnp.mean(ssim_metric(pred, target))
        loss = loss + lambda_ssim * dssim_scale * (1.0 - terms["ssim"])
    return loss, terms


def locosplat_loss(pred_final, pred_coarse, target, *, lambda_lpips: float = 0.05,
                   beta: float = LOCOSPLAT_COARSE_BETA, lpips_params=None,
                   lpips_precision=jax.lax.Precision.HIGHEST):
    """Paper 000 eq. 6: l(final render) + beta * l(coarse-depth render), l = MSE + lambda * LPIPS."""
    kw = {"lambda_lpips": lambda_lpips, "lpips_params": lpips_params, "lpips_precision": lpips_precision}
    loss_final, terms_final = mse_lpips_loss(pred_final, target, **kw)
    loss_coarse, terms_coarse = mse_lpips_loss(pred_coarse, target, **kw)
    terms = {**terms_final, **{f"coarse_{k}": v for k, v in terms_coarse.items()}}
    return loss_final + beta * loss_coarse, terms


_KINDS = {"mse_lpips": (mse_lpips_loss, {"lambda_mse", "lambda_lpips"}),
          "mse_ssim": (mse_ssim_loss, {"lambda_mse", "lambda_ssim", "dssim_scale"})}


def rendering_loss(pred, target, config, *, lpips_params=None, lpips_precision=jax.lax.Precision.HIGHEST):
    """Dispatch on a loss config (dict or ConfigDict, e.g. `LOCOSPLAT`): {"kind": ..., weights...}.

    Unknown kinds or keys raise a ValueError naming the key, so a typo never silently drops a term.
    """
    cfg = dict(config)
    kind = cfg.pop("kind", None)
    if kind not in _KINDS:
        raise ValueError(f"loss config key 'kind' is {kind!r}; expected one of {sorted(_KINDS)}")
    fn, allowed = _KINDS[kind]
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ValueError(f"loss config for kind {kind!r} has unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    if kind == "mse_lpips":
        return fn(pred, target, lpips_params=lpips_params, lpips_precision=lpips_precision, **cfg)
    return fn(pred, target, **cfg)
