"""Official PyTorch TokenGS (nv-tlabs/TokenGS) / LocusGS (leo-frank/LocusGS) `state_dict` -> Flax params
of `LocusNet`.

    params = import_weights(state_dict, config)              # config.model.anchors picks the layout
    python -m experiments.import_weights --family=locusgs --config=tokengs_4096 --from=tokengs.pth --workdir=DIR

Mapping (torch `Linear.weight` [out, in] -> `kernel` [in, out]; `Conv2d.weight` [out, in, kh, kw] ->
`kernel` [kh, kw, in, out]; `LayerNorm.weight` -> `scale`; per-head LayerNorms sit under `<name>/norm`):

    patch_embed.{proj,norm}                    rgb_embed, rgb_norm
    patch_plucker_embed.{proj,norm}            ray_embed, ray_norm
    enc_dec_backbone.encoder.<i>.*             encoder_<i>/* (norm1, attn/{qkv,q_norm,k_norm,proj}, ls1, norm2,
                                               mlp, ls2)
    enc_dec_backbone.{encoder_norm,kv_proj,k_proj_norm}   encoder_norm, kv_proj, k_norm
    enc_dec_backbone.decoder_blocks.<i>.       decoder_<i>/
      gs_cross_attn.{gs_token_norm, q_proj | q_content_proj, q_norm, out_proj}, gs_cross_attn_scale
                                               norm_cross, q_proj, q_norm, out_proj, ls_cross
      gs_self_attn.{norm, gs_self_attn.*}, gs_self_attn_scale     norm_self, self_attn/*, ls_self
      mlp.{norm, mlp.*}, mlp_scale             norm_mlp, mlp/*, ls_mlp
      anchor_head_self_attn.*                  pe_mlp/*                               (LocusGS)
      gs_cross_attn.geo_scale                  bias_gamma[i] (one vector of all layers) (LocusGS)
      gs_cross_attn.{anchor_norm, plucker_norm, q_pos_norm, k_pos_norm, tau_sample}
                                               unused_norm_a, unused_norm_b, unused_head_norm_a, unused_head_norm_b,
                                               unused_tau_sample (never used by forward; config.model.unused_params)
    activation_head.deconv                     gaussian_head
    gs_tokens, gs_anchor_xyz_raw, gs_anchor_radius_raw    gs_tokens, anchor_mu, anchor_rho
    xyz_embed.*, radius_embed.*                dmu_head/*, drho_head/*                (LocusGS)

Every torch key must map to a parameter of the configured model and every parameter must get a value:
a ValueError names each stray key, each missing parameter and each shape mismatch.
"""

from __future__ import annotations

import re
from typing import Mapping

import jax
import numpy as np
from flax import traverse_util

from locojax.models.locusgs.config import model_config_from

KINDS = ("official",)
_DEC = r"enc_dec_backbone\.decoder_blocks\.(\d+)\."
_ENC = r"enc_dec_backbone\.encoder\.(\d+)\."

# (regex on the torch key without its ".weight"/".bias" leaf, Flax module path with {0} = layer index)
_MODULES = [
    (r"patch_embed\.proj", "rgb_embed"),
    (r"patch_embed\.norm", "rgb_norm"),
    (r"patch_plucker_embed\.proj", "ray_embed"),
    (r"patch_plucker_embed\.norm", "ray_norm"),
    (_ENC + r"norm1", "encoder_{0}/norm1"),
    (_ENC + r"norm2", "encoder_{0}/norm2"),
    (_ENC + r"attn\.(qkv|proj)", "encoder_{0}/attn/{1}"),
    (_ENC + r"attn\.(q_norm|k_norm)", "encoder_{0}/attn/{1}/norm"),
    (_ENC + r"mlp\.(fc1|fc2)", "encoder_{0}/mlp/{1}"),
    (r"enc_dec_backbone\.encoder_norm", "encoder_norm"),
    (r"enc_dec_backbone\.kv_proj", "kv_proj"),
    (r"enc_dec_backbone\.k_proj_norm", "k_norm/norm"),
    (_DEC + r"gs_cross_attn\.gs_token_norm", "decoder_{0}/norm_cross"),
    (_DEC + r"gs_cross_attn\.(?:q_proj|q_content_proj)", "decoder_{0}/q_proj"),
    (_DEC + r"gs_cross_attn\.q_norm", "decoder_{0}/q_norm/norm"),
    (_DEC + r"gs_cross_attn\.out_proj", "decoder_{0}/out_proj"),
    (_DEC + r"gs_cross_attn\.anchor_norm", "decoder_{0}/unused_norm_a"),
    (_DEC + r"gs_cross_attn\.plucker_norm", "decoder_{0}/unused_norm_b"),
    (_DEC + r"gs_cross_attn\.q_pos_norm", "decoder_{0}/unused_head_norm_a/norm"),
    (_DEC + r"gs_cross_attn\.k_pos_norm", "decoder_{0}/unused_head_norm_b/norm"),
    (_DEC + r"gs_self_attn\.norm", "decoder_{0}/norm_self"),
    (_DEC + r"gs_self_attn\.gs_self_attn\.(qkv|proj)", "decoder_{0}/self_attn/{1}"),
    (_DEC + r"gs_self_attn\.gs_self_attn\.(q_norm|k_norm)", "decoder_{0}/self_attn/{1}/norm"),
    (_DEC + r"mlp\.norm", "decoder_{0}/norm_mlp"),
    (_DEC + r"mlp\.mlp\.(fc1|fc2)", "decoder_{0}/mlp/{1}"),
    (_DEC + r"anchor_head_self_attn\.(fc1|fc2)", "decoder_{0}/pe_mlp/{1}"),
    (r"activation_head\.deconv", "gaussian_head"),
    (r"xyz_embed\.(fc1|fc2)", "dmu_head/{0}"),
    (r"radius_embed\.(fc1|fc2)", "drho_head/{0}"),
]
# whole-tensor parameters: (regex on the full key, Flax path)
_TENSORS = [
    (_DEC + r"(?:gs_cross_attn_scale)\.gamma", "decoder_{0}/ls_cross/gamma"),
    (_DEC + r"(?:gs_self_attn_scale)\.gamma", "decoder_{0}/ls_self/gamma"),
    (_DEC + r"(?:mlp_scale)\.gamma", "decoder_{0}/ls_mlp/gamma"),
    (_ENC + r"(ls1|ls2)\.gamma", "encoder_{0}/{1}/gamma"),
    (_DEC + r"gs_cross_attn\.tau_sample", "decoder_{0}/unused_tau_sample"),
    (r"gs_tokens", "gs_tokens"),
    (r"gs_anchor_xyz_raw", "anchor_mu"),
    (r"gs_anchor_radius_raw", "anchor_rho"),
]
GEO_SCALE = re.compile(_DEC + r"gs_cross_attn\.geo_scale")


def _convert(key: str, value: np.ndarray):
    """(Flax path, array in Flax layout) for one torch entry, or None if the key matches no rule."""
    for pattern, target in _TENSORS:
        m = re.fullmatch(pattern, key)
        if m:
            return tuple(target.format(*m.groups()).split("/")), value
    module, _, leaf = key.rpartition(".")
    for pattern, target in _MODULES:
        m = re.fullmatch(pattern, module)
        if not m:
            continue
        path = tuple(target.format(*m.groups()).split("/"))
        if leaf == "bias":
            return path + ("bias",), value
        if leaf != "weight":
            return None
        if value.ndim == 4:  # Conv2d [out, in, kh, kw] -> [kh, kw, in, out]
            return path + ("kernel",), value.transpose(2, 3, 1, 0)
        if value.ndim == 2:  # Linear [out, in] -> [in, out]
            return path + ("kernel",), value.T
        return path + ("scale",), value  # LayerNorm
    return None


def check_manifest(manifest: Mapping[str, tuple], abstract_params) -> None:
    """Raise ValueError unless `manifest` ({torch key: shape}, no arrays) maps 1:1 onto `abstract_params`
    (checks full-size checkpoints' layouts without memory: the stand-ins are zero-stride views)."""
    zero = np.zeros((), np.float32)
    convert_state_dict({k: np.broadcast_to(zero, tuple(s)) for k, s in manifest.items()}, abstract_params,
                       copy=False)


def unused_by_config(config) -> tuple:
    """Flax parameter paths (regexes on "a/b/c") that the configured ablation never uses and that the
    official module then does not create: its content-only self-attention has no
    `anchor_head_self_attn`, content-only cross-attention no `geo_scale`/`tau_sample`, and without
    radius refinement there is no `radius_embed`. They may be absent from a checkpoint (they keep
    their fresh initialisation)."""
    m = model_config_from(config.model)
    if not m.anchors:
        return ()
    out = []
    if not m.anchor_self_pe:
        out.append(r"decoder_\d+/pe_mlp/.*")
    if not m.anchor_cross_bias:
        out += [r"bias_gamma", r"decoder_\d+/unused_tau_sample"]
    if not m.refine_radius:
        out.append(r"drho_head/.*")
    return tuple(out)


def convert_state_dict(state_dict: Mapping[str, np.ndarray], abstract_params, *, copy: bool = True,
                       may_be_missing: tuple = ()) -> dict:
    """torch state_dict (numpy arrays or tensors) -> nested Flax params matching `abstract_params`
    (the model's params or `jax.eval_shape` ShapeDtypeStructs). Raises ValueError on any mismatch.
    copy=False leaves the arrays as (possibly transposed) views. `may_be_missing`: regexes of Flax
    paths ("a/b/c") allowed to have no torch key (left out of the result)."""
    expected = {k: tuple(v.shape) for k, v in traverse_util.flatten_dict(abstract_params).items()}
    flat, stray, bad_shape, geo = {}, [], [], {}
    for key, value in state_dict.items():
        if hasattr(value, "detach"):
            value = value.detach().cpu().float().numpy()
        value = np.asarray(value, np.float32)
        m = GEO_SCALE.fullmatch(key)
        if m:
            geo[int(m.group(1))] = (key, value)
            continue
        hit = _convert(key, value)
        if hit is None or hit[0] not in expected:
            stray.append(key)
            continue
        path, arr = hit
        if tuple(arr.shape) != expected[path]:
            bad_shape.append(f"{key} {tuple(value.shape)} -> {'/'.join(path)} {expected[path]}")
            continue
        # (np.ascontiguousarray would turn 0-d arrays into 1-d ones)
        flat[path] = np.array(arr, np.float32, order="C") if copy else arr
    if geo:  # one softplus gate per decoder layer -> the [L] vector bias_gamma
        path = ("bias_gamma",)
        if path not in expected:
            stray += [k for k, _ in geo.values()]
        elif sorted(geo) != list(range(expected[path][0])) or any(v.size != 1 for _, v in geo.values()):
            bad_shape.append(f"geo_scale of layers {sorted(geo)} -> bias_gamma {expected[path]}")
        else:
            flat[path] = np.array([geo[i][1].reshape(()) for i in sorted(geo)], np.float32)
    missing = ["/".join(p) for p in expected if p not in flat]
    missing = [p for p in missing if not any(re.fullmatch(r, p) for r in may_be_missing)]
    problems = []
    if stray:
        problems.append(f"torch keys with no Flax parameter in this config: {sorted(stray)}")
    if missing:
        problems.append(f"Flax parameters with no torch key: {sorted(missing)}")
    if bad_shape:
        problems.append(f"shape mismatches: {bad_shape}")
    if problems:
        hint = ""
        if any("gs_anchor" in k or "geo_scale" in k for k in stray):
            hint = " (a LocusGS checkpoint: use a locusgs_* config, config.model.anchors=True)"
        elif any("anchor_norm" in k or "tau_sample" in k for k in stray):
            hint = " (LocusGS checkpoints hold unused per-layer LayerNorms: set config.model.unused_params=True)"
        elif any(m.startswith("anchor_") or m == "bias_gamma" for m in missing):
            hint = " (a TokenGS checkpoint: use a tokengs_* config, config.model.anchors=False)"
        raise ValueError("TokenGS/LocusGS state_dict does not match the model config: " + "; ".join(problems) + hint)
    return traverse_util.unflatten_dict(flat)


def abstract_params(config):
    """The Flax params `build(config)` creates, as ShapeDtypeStructs (no memory)."""
    import jax.numpy as jnp

    from locojax.models.locusgs import build

    model = build(config)
    p = int(config.model.patch)  # parameter shapes do not depend on the views or the image size
    k = jnp.array([[[[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]]]])
    c2w = jnp.eye(4)[None, None]
    return jax.eval_shape(lambda: model.net.init(jax.random.PRNGKey(0), jnp.zeros((1, 1, p, p, 3)), c2w, k))["params"]


def import_weights(state_dict: Mapping[str, np.ndarray], config, kind: str = "official") -> dict:
    """The `experiments.import_weights` hook: an official TokenGS (config.model.anchors=False) or LocusGS
    (anchors=True) state_dict -> the Flax params of `build(config)`'s network (nested float32 numpy).
    kind: "official" (the released torch layouts)."""
    if kind not in KINDS:
        raise ValueError(f"--kind={kind!r}: TokenGS/LocusGS imports only {KINDS} state_dicts")
    return convert_state_dict(state_dict, abstract_params(config), may_be_missing=unused_by_config(config))
