"""Official PyTorch GlobalSplat `state_dict` -> Flax params of `GlobalSplatNet`.

Rules (the Flax modules are named after the torch attributes, so the mapping is mechanical):
* `a.b.<i>.c` -> path (a, b_<i>, c); the tokenizer's torch attributes (`rgb_patch_embeds`,
  `ray_patch_embeds`, `view_pe`) live under the Flax module `tokenizer`;
* `Linear.weight` [out, in] -> `kernel` [in, out]; `LayerNorm.weight` -> `scale`; `bias`, `gamma`
  and the token banks keep their names and layouts;
* the buffer `gaussian_decoder.patch_center_bias` is not a parameter: it must equal the configured
  mean offset (0, 0, 1.5) and is dropped.

`convert_state_dict` raises a ValueError naming every torch key that maps nowhere, every Flax
parameter left without a value, and every shape mismatch. `check_manifest` does the same against
a {key: shape} manifest without any arrays (shapes from `jax.eval_shape`).
"""

from __future__ import annotations

import re
from typing import Mapping

import jax
import numpy as np
from flax import traverse_util

TOKENIZER_ATTRS = ("rgb_patch_embeds", "ray_patch_embeds", "view_pe")
BUFFERS = {"gaussian_decoder.patch_center_bias"}


def torch_key_to_path(key: str, ndim: int) -> tuple[tuple[str, ...], bool]:
    """A torch key and its tensor rank -> (Flax param path, transpose?)."""
    parts = key.split(".")
    path: list[str] = []
    for part in parts:
        if part.isdigit() and path:
            path[-1] = f"{path[-1]}_{part}"
        else:
            path.append(part)
    if parts[0] in TOKENIZER_ATTRS:
        path.insert(0, "tokenizer")
    leaf = path[-1]
    transpose = False
    if leaf == "weight":
        if ndim == 2:
            path[-1], transpose = "kernel", True
        elif ndim == 1:
            path[-1] = "scale"
        else:
            raise ValueError(f"{key}: a weight of rank {ndim} has no Flax counterpart")
    return tuple(path), transpose


def _expected_flat(abstract_params) -> dict:
    return {k: tuple(v.shape) for k, v in traverse_util.flatten_dict(abstract_params).items()}


def check_manifest(manifest: Mapping[str, tuple], abstract_params, mean_offset=(0.0, 0.0, 1.5)) -> None:
    """Raise ValueError unless `manifest` (torch key -> shape) maps 1:1 onto `abstract_params`."""
    expected = _expected_flat(abstract_params)
    seen, unmapped, bad_shape = set(), [], []
    for key, shape in manifest.items():
        if key in BUFFERS:
            continue
        path, transpose = torch_key_to_path(key, len(shape))
        want = tuple(shape)[::-1] if transpose else tuple(shape)
        if path not in expected:
            unmapped.append(key)
        elif expected[path] != want:
            bad_shape.append(f"{key} {tuple(shape)} -> {'/'.join(path)} {expected[path]}")
        else:
            seen.add(path)
    missing = ["/".join(p) for p in expected if p not in seen]
    problems = []
    if unmapped:
        problems.append(f"torch keys with no Flax parameter: {sorted(unmapped)}")
    if missing:
        problems.append(f"Flax parameters with no torch key: {sorted(missing)}")
    if bad_shape:
        problems.append(f"shape mismatches: {bad_shape}")
    if problems:
        raise ValueError("GlobalSplat state_dict does not match the model config: " + "; ".join(problems))


def convert_state_dict(state_dict: Mapping[str, np.ndarray], abstract_params,
                       mean_offset=(0.0, 0.0, 1.5), dtype=np.float32) -> dict:
    """torch state_dict (arrays or tensors) -> Flax params (the `params` collection, nested dict).

    Args:
      state_dict: key -> array-like (torch tensors are converted with `.numpy()`).
      abstract_params: the model's params (or `jax.eval_shape` ShapeDtypeStructs) to match.
    """
    arrays = {}
    for k, v in state_dict.items():
        if hasattr(v, "detach"):
            v = v.detach().cpu().numpy()
        arrays[k] = np.asarray(v)
    check_manifest({k: v.shape for k, v in arrays.items()}, abstract_params, mean_offset)
    for key in BUFFERS & set(arrays):
        if not np.allclose(arrays[key].reshape(-1), np.asarray(mean_offset, np.float32)):
            raise ValueError(f"{key} = {arrays[key].reshape(-1)} but the config's mean_offset is "
                             f"{tuple(mean_offset)}; set config.model.mean_offset to match")
    flat = {}
    for key, value in arrays.items():
        if key in BUFFERS:
            continue
        path, transpose = torch_key_to_path(key, value.ndim)
        flat[path] = np.ascontiguousarray(value.T if transpose else value).astype(dtype)
    return traverse_util.unflatten_dict(flat)


def count_params(params) -> int:
    return int(sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params)))


def state_dict_pattern(key: str) -> str:
    """`slot_encoder.geo_rounds.3.tower.1.attn.qkv.weight` -> `slot_encoder.geo_rounds.#.tower.#...`."""
    return re.sub(r"\.\d+(?=\.)", ".#", key)


def import_weights(state_dict: Mapping[str, np.ndarray], config, kind: str = "official") -> dict:
    """The `experiments.import_weights` hook: an official GlobalSplat `state_dict` -> the Flax params
    of `build(config)`'s network (nested dict of float32 numpy; the trainer adds the frozen LPIPS
    weights itself).

    kind: "official" (the only network layout released, R-Itk/globalsplat), or "vgg19": a torchvision
    `vgg19` state_dict -> the frozen trunk of the perceptual loss ({PERCEPTUAL_KEY: ...}); the run's
    config must select that trunk (`loss.perceptual_net="vgg19"` with `loss.vgg19_weights` set, which is
    also how training reads it without an import)."""
    if kind == "vgg19":
        return import_vgg19(state_dict, config)
    if kind != "official":
        raise ValueError(f"--kind={kind!r}: GlobalSplat imports 'official' or 'vgg19' state_dicts")
    import jax.numpy as jnp

    from locojax.models.globalsplat import build
    from locojax.types import Views

    model = build(config)
    v = int(config.data.num_context_views)
    h, w = tuple(config.data.image_shape)
    k = np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32)
    context = Views(images=jnp.zeros((1, v, h, w, 3)), intrinsics=jnp.broadcast_to(k, (1, v, 3, 3)),
                    c2w=jnp.broadcast_to(jnp.eye(4), (1, v, 4, 4)), near=jnp.ones((1, v)),
                    far=jnp.ones((1, v)), index=jnp.zeros((1, v), jnp.int32))
    abstract = jax.eval_shape(lambda: model.net.init(jax.random.PRNGKey(0), context.images, context.c2w,
                                                     context.intrinsics))["params"]
    return convert_state_dict(state_dict, abstract, mean_offset=tuple(config.model.mean_offset))


def import_vgg19(state_dict: Mapping[str, np.ndarray], config) -> dict:
    """A torchvision vgg19 state_dict -> {PERCEPTUAL_KEY: the perceptual trunk} (see `import_weights`)."""
    from locojax.losses.perceptual import vgg_convs_from_state_dict
    from locojax.models.globalsplat.config import loss_config_from
    from locojax.models.globalsplat.model import PERCEPTUAL_KEY
    from locojax.models.globalsplat.objective import resolve_perceptual, trunk_tree

    choice = resolve_perceptual(loss_config_from(config.loss))
    if choice.arch != "vgg19":
        raise ValueError(f"--kind=vgg19: the run's config uses {choice.description}; set "
                         "--config.loss.perceptual_net=vgg19 --config.loss.vgg19_weights=<the vgg19 file>")
    return {PERCEPTUAL_KEY: trunk_tree(vgg_convs_from_state_dict(state_dict, "vgg19", source="--kind=vgg19"))}
