"""The papers' loss constants (configs/paper_losses.py) as the papers and released code state them."""

import pytest

from configs.paper_losses import locosplat_loss_config, locusgs_loss_config


def test_locosplat_eq6():
    c = locosplat_loss_config()
    assert (c.mse_weight, c.lpips_weight, c.coarse_weight) == (1.0, 0.05, 0.9)


def test_locusgs_eqs_26_to_30_and_tokengs():
    c = locusgs_loss_config()
    assert (c.mse_weight, c.dssim_weight, c.dssim_padding) == (1.0, 0.2, "same")
    assert (c.visibility_gaussian_weight, c.visibility_anchor_weight, c.visibility_max_penalty) == (1.0, 0.1, 1.0)
    # eq. 30: w_m = m / sum_n n over the supervised layers
    m = len(c.supervised_layers)
    assert c.supervised_layers == (6, 12)
    assert c.layer_weights == pytest.approx([k / (m * (m + 1) / 2) for k in range(1, m + 1)])
    t = locusgs_loss_config("tokengs")
    assert (t.supervised_layers, t.layer_weights, t.visibility_anchor_weight) == ((12,), (1.0,), 0.0)
    assert t.dssim_weight == 0.2
    with pytest.raises(ValueError, match="variant"):
        locusgs_loss_config("locus")
