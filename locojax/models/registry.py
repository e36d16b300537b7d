"""`build_model(config)`: the one place that maps `config.model_family` to a family module.

A family is a module `locojax.models.<family>` exposing `build(config) -> GaussianModel`. A dotted
name (e.g. "tests.train.toy_family") names an out-of-tree module with the same `build`, so new or
test-only families plug in without editing this file or the trainer.
"""

from __future__ import annotations

import importlib
import pkgutil

from locojax.models.interface import GaussianModel



def available_families() -> list[str]:
    """The sub-packages/modules of `locojax.models` that are families: those with a callable `build`
    (so shared code such as `common`, `interface` and this module is not listed)."""
    import locojax.models as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)
                  if m.name != "registry" and callable(getattr(importlib.import_module(f"locojax.models.{m.name}"),
                                                               "build", None)))


def build_model(config) -> GaussianModel:
    family = config.get("model_family", "")
    if not family:
        raise ValueError(f"config.model_family is empty; one of: {available_families()}")
    module_name = family if "." in family else f"locojax.models.{family}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise ValueError(
                f"config.model_family={family!r}: no module {module_name}; known families: "
                f"{available_families()}"
            ) from e
        raise
    if not hasattr(module, "build"):
        raise ValueError(f"config.model_family={family!r}: {module_name} has no build(config)")
    return module.build(config)
