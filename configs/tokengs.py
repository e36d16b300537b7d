"""TokenGS presets: the `locusgs` model family with the anchors off (configs/locusgs.py).

    tokengs_1024 / tokengs_base      218,871,040 params     tokengs_4096 / tokengs_finetune  222,016,768
    tokengs_tiny                     the locusgs_tiny network without anchors, supervised (4,), 16 Gaussians
                                     per token, 2,000 steps (configs/locusgs.py:_tiny)
Anchors off = no anchor parameters, z + 1 head offset, supervision at the last layer, no anchor L_vis.
"""

from __future__ import annotations

from configs import locusgs

PRESETS = locusgs.PRESETS
MODEL_FAMILY = "locusgs"  # the model family these configs build


def get_config(preset: str = "base"):
    return locusgs.get_config(preset, anchors=False)
