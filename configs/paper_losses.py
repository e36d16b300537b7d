"""The papers' loss constants for families whose `configs/<family>.py` is being written.

GlobalSplat's table is `configs/globalsplat.py` (`config.loss`). When `configs/locosplat.py` and
`configs/locusgs.py` exist they set `config.loss = locosplat_loss_config()` /
`locusgs_loss_config(variant)`, so each constant stays written once, here. Every weight multiplies a
family-neutral term of `locojax.losses` (mse, dssim, lpips, visibility_loss).
"""

from __future__ import annotations

import ml_collections

LOCUSGS_VARIANTS = ("locusgs", "tokengs")


def locosplat_loss_config() -> ml_collections.ConfigDict:
    """LoCoSplat (paper 000, eq. 6; the DepthSplat/VolSplat recipe):
    l(final) + coarse_weight * l(coarse-depth set), l = mse_weight * MSE + lpips_weight * LPIPS."""
    return ml_collections.ConfigDict(dict(
        mse_weight=1.0,
        lpips_weight=0.05,   # lambda, LPIPS-VGG with normalize=True
        coarse_weight=0.9,   # beta: the coarse-depth Gaussian set's render (extra set)
    ))


def locusgs_loss_config(variant: str = "locusgs") -> ml_collections.ConfigDict:
    """LocusGS (paper 002, eqs. 26-30) or its baseline TokenGS (released `tokengs/models/losses.py`).

    Per supervised layer l_m (eq. 29):
      L^{l_m} = mse_weight MSE + dssim_weight D-SSIM + visibility_gaussian_weight L_vis(Gaussian centres)
                + visibility_anchor_weight L_vis(anchor centres),
    with D-SSIM = (1 - SSIM) / 2 ('same' padding: fused-ssim, as TokenGS trains; `locojax.losses.dssim`)
    and L_vis over the target views clamped per point at visibility_max_penalty (TokenGS
    `visibility_distance_threshold`). The objective is sum_m layer_weights[m] L^{l_m} (eq. 30:
    w_m = m / sum_n n over the supervised layers (6, 12) -> 1/3, 2/3).
    TokenGS: the final layer only, no anchors.
    """
    if variant not in LOCUSGS_VARIANTS:
        raise ValueError(f"locusgs_loss_config: variant={variant!r}; expected one of {LOCUSGS_VARIANTS}")
    config = ml_collections.ConfigDict(dict(
        mse_weight=1.0,
        dssim_weight=0.2,                 # lambda_SSIM (eq. 26)
        dssim_padding="same",
        visibility_gaussian_weight=1.0,   # lambda_G (eq. 29)
        visibility_anchor_weight=0.1,     # lambda_A (eq. 29)
        visibility_max_penalty=1.0,
        supervised_layers=(6, 12),        # 1-based decoder layers, the final one last (Table 5)
        layer_weights=(1.0 / 3.0, 2.0 / 3.0),  # eq. 30
    ))
    if variant == "tokengs":
        config.visibility_anchor_weight = 0.0
        config.supervised_layers = (12,)
        config.layer_weights = (1.0,)
    return config
