"""DepthBranch: LoCoSplat's depth branch (paper sec. 2.1), DepthSplat's MultiViewUniMatch +
feature upsampler (cvg/depthsplat `mv_unimatch.py`, `encoder_depthsplat.py`) with static shapes.

    out = DepthBranch(cfg).apply(params, images, intrinsics, c2w, near, far, train=...)

Per scale s (0: 1/4 resolution, D global candidates linear in inverse depth over [1/far, 1/near];
s > 0: x2 resolution, D / 4**s local candidates around the x2-upsampled previous inverse depth,
interval (range / (D - 1)) / 2**s): plane-sweep cost volume against the nearest cameras, regressor
-> softmax over candidates -> inverse depth sum_k p_k d_k. After the last scale a DPT head adds a
residual to the bilinearly upsampled inverse depth, clamped to [1/far, 1/near].
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from locojax.models.common.layers import TorchDense
from locojax.models.locosplat.depth.cnn import CNNEncoder
from locojax.models.locosplat.depth.config import TRUNKS, DepthBranchConfig, DepthBranchOutput
from locojax.models.locosplat.depth.cost_volume import plane_sweep_cost_volume
from locojax.models.locosplat.depth.dinov2 import PATCH, DinoV2
from locojax.models.locosplat.depth.dpt import DPTHead
from locojax.models.locosplat.depth.mv_transformer import MultiViewTransformer, nearest_views
from locojax.models.locosplat.depth.pyramid import FeaturePyramid
from locojax.models.locosplat.depth.resize import resize_hw, upsample_nearest
from locojax.models.locosplat.depth.unet import Regressor

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


class DepthBranch(nn.Module):
    """images [B, V, H, W, 3] in [0, 1]; intrinsics [B, V, 3, 3] normalised by width/height;
    c2w [B, V, 4, 4] OpenCV camera-to-world; near, far [B, V] -> DepthBranchOutput (see config.py).
    H and W must be multiples of 4 * 2**(len(unet_channel_mult) - 1) * attn_splits (e.g. 32 for the
    defaults: the 1/4 map is split into 2 x 2 windows and downsampled twice by the UNet)."""

    cfg: DepthBranchConfig

    @nn.compact
    def __call__(self, images, intrinsics, c2w, near, far, *, train: bool) -> DepthBranchOutput:
        cfg = self.cfg
        b, v, hh, ww, _ = images.shape
        n = b * v
        f32 = jnp.float32
        x = ((images.astype(f32) - IMAGENET_MEAN) / IMAGENET_STD).reshape(n, hh, ww, 3)
        k_pix = intrinsics.astype(f32) * jnp.array([ww, hh, 1.0], f32)[:, None]  # rows 0, 1 to pixels
        inv_min = (1.0 / far.astype(f32)).reshape(n)
        inv_max = (1.0 / near.astype(f32)).reshape(n)
        nbr = nearest_views(c2w, cfg.num_neighbours)  # [B, V, M]
        m = nbr.shape[-1]

        # CNN (high to low: 1/2 64, 1/2 96, 1/4 C) and the multi-view transformer at 1/4.
        img_dtype = jnp.dtype(cfg.image_dtype)
        cnn_all = CNNEncoder(cfg.feature_channels, img_dtype, name="cnn")(x)
        h0, w0 = cnn_all[-1].shape[1:3]
        mv = MultiViewTransformer(cfg.feature_channels, cfg.transformer_layers, cfg.attn_splits,
                                  cfg.ffn_expansion, img_dtype, name="transformer")(
            cnn_all[-1].reshape(b, v, h0, w0, -1), nbr).reshape(n, h0, w0, -1).astype(f32)
        cnn_all = [c.astype(f32) for c in cnn_all]  # matching, regression and DPT heads in float32
        cnn_low_to_high = cnn_all[::-1][: cfg.num_scales]
        mv_list = FeaturePyramid(cfg.num_scales, name="mv_pyramid")(mv) if cfg.num_scales > 1 else [mv]

        # Monocular trunk on the image floor-resized to a multiple of 14; taps to 1/8 (then x2 for 1/4).
        taps = self._mono_taps(x, hh, ww)
        mono = resize_hw(taps[-1], (2 * taps[-1].shape[1], 2 * taps[-1].shape[2]), "bilinear", True)
        mono_list = FeaturePyramid(cfg.num_scales, name="mono_pyramid")(mono) if cfg.num_scales > 1 else [mono]

        gather = jax.vmap(lambda a, i: a[i])
        inv_depth = None
        probs = []
        d0 = cfg.num_candidates
        for s in range(cfg.num_scales):
            factor = cfg.upsample_factor * 2 ** (cfg.num_scales - 1 - s)
            k_s = k_pix.reshape(n, 3, 3) * jnp.array([1.0 / factor, 1.0 / factor, 1.0], f32)[:, None]
            feats = mv_list[s]
            h, w = feats.shape[1:3]
            ds = d0 // 4 ** s
            lin = jnp.linspace(0.0, 1.0, ds, dtype=f32)
            if s == 0:
                cand = inv_min[:, None] + lin[None] * (inv_max - inv_min)[:, None]  # [N, D]
                cand = jnp.broadcast_to(cand[:, :, None, None], (n, ds, h, w))
            else:
                prev = jax.lax.stop_gradient(resize_hw(inv_depth[..., None], (h, w), "bilinear", True))[..., 0]
                interval = ((inv_max - inv_min) / (d0 - 1) / 2 ** s)[:, None, None]
                lo = jnp.maximum(prev - interval * (ds // 2), inv_min[:, None, None])
                hi = jnp.minimum(prev + interval * (ds // 2 - 1), inv_max[:, None, None])
                cand = lo[:, None] + lin[None, :, None, None] * (hi - lo)[:, None]  # [N, D, h, w]
            f_bv = feats.reshape(b, v, h, w, -1)
            nbr_feats = gather(f_bv, nbr).reshape(n, m, h, w, -1)
            c2w_bv = c2w.astype(f32)
            cost = plane_sweep_cost_volume(feats, nbr_feats, k_s, c2w_bv.reshape(n, 4, 4),
                                           gather(c2w_bv, nbr).reshape(n, m, 4, 4), cand)
            concat = jnp.concatenate([cost, cnn_low_to_high[s], feats, mono_list[s]], axis=-1)
            mult = tuple(cfg.unet_channel_mult) + (1,) * s
            attn = tuple(r * 2 ** s for r in cfg.unet_attn_resolutions)
            prob = Regressor(cfg.unet_channels // 2 ** s, ds, mult, attn, v, cfg.unet_num_res_blocks,
                             cfg.unet_head_channels, cfg.depthwise_separable,
                             name=f"regressor{s}")(concat)  # [N, h, w, D]
            probs.append(prob)
            inv_depth = jnp.sum(prob * jnp.moveaxis(cand, 1, -1), axis=-1)  # [N, h, w]
            if s == 0:
                coarse_inv = inv_depth

        mv_for_dpt = mv if cfg.num_scales == 1 else mv_list[::-1]
        residual = DPTHead(cfg.upsampler_features, tuple(cfg.upsampler_out_channels), cfg.upsample_factor,
                           cfg.num_scales, False, name="upsampler")(taps, cnn_all, mv_for_dpt, inv_depth[..., None])
        up = resize_hw(inv_depth[..., None], (hh, ww), "bilinear", True)
        inv_final = jnp.clip(up + residual, inv_min[:, None, None, None], inv_max[:, None, None, None])[..., 0]
        feats_full = DPTHead(cfg.feature_head_features, tuple(cfg.feature_head_out_channels), cfg.upsample_factor,
                             cfg.num_scales, True, name="feature_head")(taps, cnn_all, mv_for_dpt)
        peak = upsample_nearest(jnp.max(probs[-1], axis=-1, keepdims=True), hh // probs[-1].shape[1])
        return DepthBranchOutput(
            depth=(1.0 / inv_final).reshape(b, v, hh, ww),
            coarse_depth=(1.0 / coarse_inv).reshape(b, v, h0, w0),
            dpt_features=feats_full.reshape(b, v, hh, ww, -1),
            peak_prob=peak.reshape(b, v, hh, ww, 1),
            match_prob0=probs[0].reshape(b, v, h0, w0, -1),
        )

    def _mono_taps(self, x, hh: int, ww: int):
        """x [N, H, W, 3] normalised -> 4 taps [N, H/8, W/8, mono_dim] (frozen trunk unless trainable)."""
        cfg = self.cfg
        dim, heads, depth, taps_idx = TRUNKS[cfg.trunk]
        rh, rw = hh // PATCH * PATCH, ww // PATCH * PATCH
        xr = resize_hw(x, (rh, rw), "bilinear", True)
        outs = DinoV2(dim, heads, depth, taps_idx, jnp.dtype(cfg.image_dtype), name="trunk")(xr)
        taps = []
        for i, (tok, _) in enumerate(outs):
            tok = tok.astype(jnp.float32)
            if not cfg.trunk_trainable:
                tok = jax.lax.stop_gradient(tok)  # frozen trunk (sec. 2.1); the optimizer also masks it
            if cfg.mono_proj_dim:
                # "four trainable 768 -> 384 projections" (B.1), one per tap, on the tokens [inf: linear].
                tok = TorchDense(cfg.mono_proj_dim, name=f"mono_proj_{i}")(tok)
            t = tok.reshape(x.shape[0], rh // PATCH, rw // PATCH, -1)
            taps.append(resize_hw(t, (hh // 8, ww // 8), "bilinear", True))
        return taps
