"""Converters of official PyTorch state dicts to the LoCoSplat depth branch's Flax parameters.

    import_weights(state_dict, config, kind) -> {"depth": params}      # experiments.import_weights hook
    convert_depth_branch(state_dict, depth_config, kind) -> (params, ignored_keys)

`state_dict`: mapping name -> array (numpy or torch tensors already `.numpy()`-ed); torch layouts
(Linear [out, in], Conv [out, in, kh, kw]). `kind`:
  "depth_anything_v2": a DepthAnythingV2 checkpoint (`depth_anything_v2_vitb.pth` or the fixture):
      every `pretrained.*` key maps into `params["trunk"]`; `pretrained.mask_token` (unused by DINOv2's
      inference path) and DepthAnythingV2's own relative-depth `depth_head.*` are returned as
      `ignored_keys` (LoCoSplat uses its own DPT heads); any other key is an error.
  "unimatch": UniMatch / DepthSplat names (`backbone.*` CNN, `transformer.*`), filled in with the
      depth branch's CNN and transformer.
  "depthsplat": a DepthSplat / VolSplat encoder state dict (`depth_predictor.*`, `feature_upsampler.*`):
      the whole depth branch (used by the fixtures).
`convert_depth_branch` returns params relative to the DepthBranch module; `import_weights` (the
family hook of `python -m experiments.import_weights`, locojax/train/import_run.py) nests them under
DEPTH_MODULE_NAME, the name the LoCoSplat model gives its DepthBranch. Every key is either mapped or
listed as ignored: nothing is silently dropped (ValueError naming the keys).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping

import numpy as np

KINDS = ("depth_anything_v2", "unimatch", "depthsplat")
DEPTH_MODULE_NAME = "depth"  # the LoCoSplat model's attribute name of its DepthBranch


def _linear(w):
    return np.asarray(w, np.float32).T


def _conv(w):
    return np.asarray(w, np.float32).transpose(2, 3, 1, 0)  # [out, in, kh, kw] -> [kh, kw, in, out]


def _set(tree, path, value):
    for p in path[:-1]:
        tree = tree.setdefault(p, {})
    if path[-1] in tree:
        raise ValueError(f"parameter {'/'.join(path)} set twice")
    tree[path[-1]] = value


def _dinov2(sd: Mapping[str, np.ndarray], prefix: str, out: dict, used: set):
    """DINOv2 `pretrained.*` -> DinoV2 params."""
    blk = re.compile(re.escape(prefix) + r"blocks\.(\d+)\.(.+)$")
    for key, val in sd.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        val = np.asarray(val, np.float32)
        m = blk.match(key)
        if name == "cls_token" or name == "pos_embed":
            _set(out, (name,), val)
        elif name == "mask_token":
            continue  # masked-image pretraining only; left to the caller's ignored list
        elif name == "patch_embed.proj.weight":
            _set(out, ("patch_embed", "kernel"), _conv(val))
        elif name == "patch_embed.proj.bias":
            _set(out, ("patch_embed", "bias"), val)
        elif name in ("norm.weight", "norm.bias"):
            _set(out, ("norm", "scale" if name.endswith("weight") else "bias"), val)
        elif m:
            i, rest = m.group(1), m.group(2)
            b = f"blocks_{i}"
            if rest in ("ls1.gamma", "ls2.gamma"):
                _set(out, (b, rest.split(".")[0]), val)
            elif rest.startswith(("norm1.", "norm2.")):
                n, p = rest.split(".")
                _set(out, (b, n, "scale" if p == "weight" else "bias"), val)
            else:
                mod = {"attn.qkv": "attn_qkv", "attn.proj": "attn_proj", "mlp.fc1": "mlp_fc1",
                       "mlp.fc2": "mlp_fc2"}.get(rest.rsplit(".", 1)[0])
                if mod is None:
                    raise ValueError(f"unknown DINOv2 key {key!r}")
                p = rest.rsplit(".", 1)[1]
                _set(out, (b, mod, "kernel" if p == "weight" else "bias"), _linear(val) if p == "weight" else val)
        else:
            raise ValueError(f"unknown DINOv2 key {key!r}")
        used.add(key)


def _strip(key: str) -> str:
    """UniMatch checkpoints ('model' dict: `backbone.*`, `transformer.*`) and DepthSplat's
    (`depth_predictor.backbone.*`, ...) name the same modules."""
    for p in ("module.", "depth_predictor."):
        if key.startswith(p):
            key = key[len(p):]
    return key


def _unimatch(sd: Mapping[str, np.ndarray], used: set) -> dict:
    """UniMatch CNN (`backbone.*`) -> params["cnn"], multi-view transformer (`transformer.*`) ->
    params["transformer"]. Keys of other UniMatch heads (flow/refinement) are errors: pass the
    backbone and transformer only."""
    out: dict = {}
    cnn_layer = re.compile(r"backbone\.(layer\d)\.(\d)\.(conv1|conv2|downsample\.0)\.(weight|bias)$")
    cnn_top = re.compile(r"backbone\.(conv1|conv2)\.(weight|bias)$")
    tr = re.compile(r"transformer\.layers\.(\d+)\.(self_attn|cross_attn_ffn)\.(q_proj|k_proj|v_proj|merge|norm1|norm2|mlp\.0|mlp\.2)\.(weight|bias)$")
    for key, val in sd.items():
        name = _strip(key)
        val = np.asarray(val, np.float32)
        leaf_conv = lambda p: ("kernel", _conv(val)) if p == "weight" else ("bias", val)  # noqa: E731
        if m := cnn_layer.match(name):
            leaf, v = leaf_conv(m.group(4))
            _set(out, ("cnn", f"{m.group(1)}_{m.group(2)}", m.group(3).replace(".", "_"), leaf), v)
        elif m := cnn_top.match(name):
            leaf, v = leaf_conv(m.group(2))
            _set(out, ("cnn", m.group(1), leaf), v)
        elif m := tr.match(name):
            mod, p = m.group(3).replace(".", "_"), m.group(4)
            if mod.startswith("norm"):
                leaf, v = ("scale" if p == "weight" else "bias"), val
            else:
                leaf, v = ("kernel", _linear(val)) if p == "weight" else ("bias", val)
            _set(out, ("transformer", f"layers_{m.group(1)}_{m.group(2)}", mod, leaf), v)
        else:
            continue
        used.add(key)
    if not out:
        raise ValueError("import_weights(unimatch): no 'backbone.*' or 'transformer.*' keys in the state dict")
    return out


def torch_module_tree(sd: Mapping[str, np.ndarray], prefix: str, used: set,
                      conv_transpose=("resize_layers_0", "resize_layers_1")) -> dict:
    """Generic map of a torch module's keys under `prefix` to our naming: `a.3.b` -> `a_3/b`,
    `scratch.` dropped (DPT), weight -> kernel (Linear .T, Conv [kh, kw, in, out], ConvTranspose
    [k, k, in, out]) or scale (norms: 1-d weight), bias -> bias."""
    out: dict = {}
    for key, val in sd.items():
        if not key.startswith(prefix):
            continue
        parts = [p for p in key[len(prefix):].split(".") if p != "scratch"]
        leaf = parts.pop()
        path = []
        for p in parts:
            if p.isdigit() and path:
                path[-1] = f"{path[-1]}_{p}"
            else:
                path.append(p)
        val = np.asarray(val, np.float32)
        if leaf == "weight":
            if val.ndim == 4:
                name, val = "kernel", (val.transpose(2, 3, 0, 1) if path[-1] in conv_transpose else _conv(val))
            elif val.ndim == 3:  # Conv1d [out, in, 1] (ldm attention) -> 1x1 conv
                name, val = "kernel", _conv(val[..., None])
            elif val.ndim == 2:
                name, val = "kernel", _linear(val)
            else:
                name = "scale"
        elif leaf == "bias":
            name = "bias"
        else:
            raise ValueError(f"unknown parameter kind in {key!r}")
        _set(out, tuple(path) + (name,), val)
        used.add(key)
    return out


def _depth_config(config):
    """DepthBranchConfig from a DepthBranchConfig, a run ConfigDict with `model.depth`, or None."""
    from locojax.models.locosplat.depth.config import DepthBranchConfig
    if config is None or isinstance(config, DepthBranchConfig):
        return config
    depth = getattr(getattr(config, "model", None), "depth", None)
    if depth is None:
        return None
    names = {f.name for f in dataclasses.fields(DepthBranchConfig)}
    return DepthBranchConfig(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(depth).items() if k in names})


def import_weights(state_dict: Mapping[str, np.ndarray], config, kind: str = "depth_anything_v2") -> dict:
    """experiments.import_weights hook: {DEPTH_MODULE_NAME: depth-branch params}; parameters the file
    does not hold (CNN, transformer, regressor, ... for a DepthAnythingV2 file) keep their init."""
    params, _ = convert_depth_branch(state_dict, _depth_config(config), kind)
    return {DEPTH_MODULE_NAME: params}


def convert_depth_branch(state_dict: Mapping[str, np.ndarray], config, kind: str):
    """See the module docstring. `config`: a DepthBranchConfig or None (its trunk width is checked)."""
    if kind not in KINDS:
        raise ValueError(f"--kind={kind!r}: LoCoSplat's converter reads one of {KINDS}")
    sd = {k: np.asarray(v) for k, v in state_dict.items()}
    used: set = set()
    params: dict = {}
    if kind == "depth_anything_v2":
        trunk: dict = {}
        _dinov2(sd, "pretrained.", trunk, used)
        if not trunk:
            raise ValueError("import_weights(depth_anything_v2): no 'pretrained.*' keys in the state dict")
        width = trunk["cls_token"].shape[-1]
        if config is not None and width != config.trunk_dim:
            raise ValueError(f"checkpoint trunk width {width} != model.depth.trunk={config.trunk!r} "
                             f"({config.trunk_dim})")
        params["trunk"] = trunk
        ignored = sorted(k for k in sd if k not in used and (k == "pretrained.mask_token"
                                                              or k.startswith("depth_head.")))
    elif kind == "unimatch":
        params.update(_unimatch(sd, used))
        ignored = []
    else:  # a DepthSplat / VolSplat encoder's depth_predictor.* and feature_upsampler.*
        params.update(_unimatch(sd, used))
        trunk: dict = {}
        _dinov2(sd, "depth_predictor.pretrained.", trunk, used)
        if trunk:
            params["trunk"] = trunk
        for pyr in ("mv_pyramid", "mono_pyramid"):
            tree = torch_module_tree(sd, f"depth_predictor.{pyr}.", used, conv_transpose=("stages_1_0", "stages_2_0", "stages_2_2"))
            if tree:
                params[pyr] = tree
        params["upsampler"] = torch_module_tree(sd, "depth_predictor.upsampler.", used)
        for prefix in ("regressor.", "regressor_residual.", "depth_head."):
            tree = torch_module_tree(sd, "depth_predictor." + prefix, used)
            for key, sub in tree.items():  # "<scale>_<layer>" or "<scale>"
                scale, _, layer = key.partition("_")
                name = prefix[:-1] + (f"_{layer}" if layer else "")
                _set(params, (f"regressor{scale}", name), sub)
        params["feature_head"] = torch_module_tree(sd, "feature_upsampler.", used)
        ignored = sorted(k for k in sd if k.endswith("pretrained.mask_token"))
    left = sorted(set(sd) - used - set(ignored))
    if left:
        raise ValueError(f"import_weights({kind}): {len(left)} keys neither mapped nor ignored, e.g. {left[:5]}")
    return params, ignored
