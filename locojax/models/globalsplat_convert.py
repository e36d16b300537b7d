"""Alias of `locojax.models.globalsplat.convert` (torch GlobalSplat state_dict -> Flax params)."""

from locojax.models.globalsplat.convert import (  # noqa: F401
    check_manifest,
    convert_state_dict,
    count_params,
    torch_key_to_path,
)
