"""The one `from_mapping` every family reads its `config.model` / `config.loss` dataclasses with, and the
registry's list of families."""

from __future__ import annotations

import dataclasses

import ml_collections
import pytest

from locojax.models.common.config_mapping import from_mapping
from locojax.models.registry import available_families


@dataclasses.dataclass(frozen=True)
class _Inner:
    width: int = 4


@dataclasses.dataclass(frozen=True)
class _Outer:
    rate: float = 0.5
    layers: tuple = (1, 2)
    flag: bool = False
    inner: _Inner = _Inner()


def test_casts_nests_skips_extra_keys_and_names_typos():
    section = ml_collections.ConfigDict(dict(rate=1, layers=[3], flag=1, inner=dict(width=8.0), remat=True))
    got = from_mapping(_Outer, section, "model", nested={"inner": _Inner}, extra_keys=("remat",))
    assert got == _Outer(rate=1.0, layers=(3,), flag=True, inner=_Inner(width=8))
    assert type(got.rate) is float and type(got.inner.width) is int
    assert from_mapping(_Outer, {}, "model") == _Outer()
    with pytest.raises(ValueError, match=r"config.model.inner.widht is not a key of _Inner; closest: \['width'\]"):
        from_mapping(_Outer, dict(inner=dict(widht=2)), "model", nested={"inner": _Inner})
    with pytest.raises(ValueError, match=r"config.loss.remat is not a key of _Outer"):
        from_mapping(_Outer, dict(remat=True), "loss")


def test_available_families_are_the_modules_with_a_build():
    assert available_families() == ["globalsplat", "locosplat", "locusgs"]
