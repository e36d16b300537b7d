"""The papers' loss constants, as the papers and released code state them, in the real config keys:
the defaults of each family's `LossConfig` and the presets built from them."""

import dataclasses

import pytest

import configs
from locojax.models.locosplat.config import LossConfig as LoCoSplatLoss
from locojax.models.locusgs.config import LossConfig as LocusLoss
from locojax.models.locusgs.config import ModelConfig as LocusModelConfig


def test_locosplat_eq6():
    c = LoCoSplatLoss()
    assert (c.mse_weight, c.lpips_weight, c.coarse_weight) == (1.0, 0.05, 0.9)
    assert configs.get_config("locosplat_6v").loss.to_dict() == dataclasses.asdict(c)


def test_locusgs_eqs_26_to_30_and_tokengs():
    c, m = LocusLoss(), LocusModelConfig()
    # eqs. 26, 29: lambda_SSIM 0.2, lambda_G 1.0, lambda_A 0.1 "in all experiments"; TokenGS's clamp 1.0
    assert (c.mse_weight, c.dssim_weight) == (1.0, 0.2)
    assert (c.vis_weight, c.anchor_vis_weight, c.vis_clamp) == (1.0, 0.1, 1.0)
    # eq. 30: w_m = m / sum_n n over the supervised layers
    n = len(m.supervised_layers)
    assert m.supervised_layers == (6, 12)
    assert c.layer_weights == pytest.approx([k / (n * (n + 1) / 2) for k in range(1, n + 1)])
    locus = configs.get_config("locusgs_base")
    assert locus.loss.to_dict() == dataclasses.asdict(c)
    assert tuple(locus.model.supervised_layers) == (6, 12)
    # TokenGS: the final layer only, no anchors
    t = configs.get_config("tokengs_base")
    assert (tuple(t.model.supervised_layers), tuple(t.loss.layer_weights), t.loss.anchor_vis_weight) == (
        (12,), (1.0,), 0.0)
    assert (t.loss.dssim_weight, t.loss.vis_weight) == (0.2, 1.0)
