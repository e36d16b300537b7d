"""The official data settings of the paper presets reach the data pipelines: DL3DV 4 + 4 views at
256x448, gap U{10, 40}, constant scale 0.15; RE10K 2 + 6 views at 256x256, gap U{45, 135}, scale
1 / max |c_i - c_0|; reflection p = 0.5 (TokenGS registry/provider, LocusGS RE10K loader)."""

import numpy as np
import pytest

import configs
from data_pipelines.config import data_value
from data_pipelines.registry import make_sampler


@pytest.mark.parametrize("name,dataset,views,shape,gap,scale", [
    ("tokengs_4096", "dl3dv", (4, 4), (256, 448), (10, 40), "0.15"),
    ("locusgs_1024", "dl3dv", (4, 4), (256, 448), (10, 40), "0.15"),
    ("locusgs_re10k", "re10k", (2, 6), (256, 256), (45, 135), "context"),
])
def test_paper_data_presets(name, dataset, views, shape, gap, scale):
    c = configs.get_config(name)
    assert c.dataset == dataset and tuple(c.data.image_shape) == shape and c.model.pose_scale == scale
    assert data_value(c, "reflect_prob") == 0.5
    sampler = make_sampler(data_value(c, "sampler"), dataset=c.dataset, num_context_views=data_value(c, "num_context_views"),
                           num_target_views=data_value(c, "num_target_views"), min_gap=data_value(c, "min_gap"),
                           max_gap=data_value(c, "max_gap"))
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(200):
        sel = sampler.sample(rng, 300)
        assert (len(sel.context), len(sel.target)) == views
        lo, hi = sel.context[0], sel.context[-1]
        assert np.all((sel.target >= lo) & (sel.target <= hi))  # targets inside the context span
        gaps.append(hi - lo)
    assert min(gaps) >= gap[0] and max(gaps) <= gap[1] and max(gaps) - min(gaps) > 0.8 * (gap[1] - gap[0])
