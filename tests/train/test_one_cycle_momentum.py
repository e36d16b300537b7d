"""OneCycle lr and beta1 cycling match torch.optim.lr_scheduler.OneCycleLR(cycle_momentum=True) step by step."""

import ml_collections
import numpy as np
import pytest

from locojax.train.optimizer import one_cycle_beta1, make_schedule


def test_beta1_and_lr_match_torch_one_cycle():
    torch = pytest.importorskip("torch")
    total, pct = 50, 0.2
    oc = ml_collections.ConfigDict(dict(schedule="one_cycle", one_cycle_pct_start=pct, one_cycle_div_factor=25.0,
                                        one_cycle_final_div_factor=1000.0, one_cycle_max_momentum=0.95,
                                        one_cycle_base_momentum=0.85))
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=4e-4, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-4, total_steps=total, pct_start=pct, div_factor=25.0,
                                                final_div_factor=1000.0, anneal_strategy="cos", cycle_momentum=True,
                                                base_momentum=0.85, max_momentum=0.95)
    b1s, lrs = [], []
    for _ in range(total):
        b1s.append(opt.param_groups[0]["betas"][0]); lrs.append(opt.param_groups[0]["lr"])
        opt.step(); sched.step()
    ours = np.array([float(one_cycle_beta1(oc, total)(s)) for s in range(total)])
    np.testing.assert_allclose(ours, b1s, atol=1e-6)
    ours_lr = np.array([float(make_schedule(oc, total, 4e-4)(s)) for s in range(total)])
    np.testing.assert_allclose(ours_lr, lrs, rtol=1e-5, atol=1e-10)
    assert int(np.argmax(ours_lr)) == int(np.argmax(lrs)) == int(pct * total) - 1
