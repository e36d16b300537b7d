"""`describe` lowers the 4096-token presets' training step (tokengs_4096: 64 scenes x 4 targets at
256x448, 262,144 Gaussians each): their flattened tile lists pass 2^31 entries and used to fail
with an int32 OverflowError in compositing; the renderer now composites them in image groups."""

import pytest

import configs


@pytest.mark.long_running
@pytest.mark.parametrize("name", ["tokengs_4096"])  # locusgs_4096: the same renderer shapes (64 x 4 at 256x448)
def test_describe_lowers_the_4096_presets(name):
    from locojax.train.describe import describe

    d = describe(configs.get_config(name))
    assert d["num_gaussians"] == 262144 and d["batch_size"] * d["num_target_views"] >= 256
    assert d["flops_train_step"] > 100 * d["flops_forward"] > 0
