"""locusgs_tiny's initial Gaussians cover about a pixel at the synthetic rooms' true depth.

When they covered ~4 px (scale_max 0.6), training moved the centres 2.5-3.7x too deep to make them
~1 px instead of shrinking the scales (docs/locusgs_depth.md). The footprint is fx * scale / z pixels,
with the scale of a zero head output (the initial one) and z the rooms' median depth, taken from the
synthetic generator's own ray-cast depth and intrinsics in the metric network frame the preset uses.
"""

import jax.numpy as jnp
import numpy as np

import configs
from data_pipelines.synthetic.generate import generate_scene
from locojax.models.locusgs.decode import decode
from locojax.models.locusgs.network import HEAD_CHANNELS


def test_locusgs_tiny_initial_footprint_is_about_a_pixel_at_the_rooms_depth():
    config = configs.get_config("locusgs_tiny")
    # metres: one initial scale means one footprint only where the rooms' depth is about constant
    assert float(config.model.pose_scale) == 1.0
    g = decode(jnp.zeros((1, 1, 1, HEAD_CHANNELS)), jnp.zeros((1, 1, 3)), jnp.ones((1, 1)), anchored=True,
               scale_max=config.model.scale_max)
    scale = float(jnp.max(g.scales))
    width = int(config.data.image_shape[1])
    footprints = []
    for index in range(2):
        scene = generate_scene(0, "train", index, (12, 12), num_frames=2)
        fx_px = float(scene["intrinsics"][0, 0, 0]) * width
        footprints.append(fx_px * scale / float(np.median(scene["depth"])))
    assert all(0.5 < f < 2.0 for f in footprints), footprints
