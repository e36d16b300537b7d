"""UniMatch/DepthSplat multi-view swin transformer (DepthSplat `unimatch/mv_transformer.py`,
`utils.py`, `position.py`) on the 1/4-resolution CNN features (paper sec. 2.1).

Each layer: windowed self-attention (no FFN) then windowed cross-attention to the view's neighbours
(keys of all neighbours in the same window are softmaxed jointly) with the FFN on [source; message].
`attn_splits` x `attn_splits` windows, shifted by half a window on odd layers. Single head.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from locojax.models.common.layers import TorchDense, gelu, layer_norm

XAVIER = nn.initializers.xavier_uniform()  # UniMatch re-inits every matrix with xavier_uniform


def sine_position(h: int, w: int, channels: int) -> np.ndarray:
    """PositionEmbeddingSine(num_pos_feats=channels/2, normalize=True) of an h x w map -> [h, w, C]."""
    npf = channels // 2
    y = np.arange(1, h + 1, dtype=np.float32)[:, None].repeat(w, 1)
    x = np.arange(1, w + 1, dtype=np.float32)[None, :].repeat(h, 0)
    y = y / (h + 1e-6) * 2 * math.pi
    x = x / (w + 1e-6) * 2 * math.pi
    dim_t = 10000.0 ** (2 * (np.arange(npf, dtype=np.float32) // 2) / npf)

    def enc(e):
        p = e[..., None] / dim_t
        return np.stack([np.sin(p[..., 0::2]), np.cos(p[..., 1::2])], axis=-1).reshape(h, w, npf)

    return np.concatenate([enc(y), enc(x)], axis=-1).astype(np.float32)


def add_window_position(x, splits: int):
    """`mv_feature_add_position`: the same sine embedding added inside each window. x [N, h, w, C]."""
    n, h, w, c = x.shape
    pos = sine_position(h // splits, w // splits, c)
    return x + jnp.asarray(np.tile(pos, (splits, splits, 1)), x.dtype)


def shifted_window_mask(h: int, w: int, splits: int) -> np.ndarray:
    """`generate_shift_window_attn_mask`: [K*K, Lw, Lw], -100 between tokens of different regions."""
    wh, ww = h // splits, w // splits
    sh, sw = wh // 2, ww // 2
    img = np.zeros((h, w), np.float32)
    cnt = 0
    for hs in (slice(0, -wh), slice(-wh, -sh), slice(-sh, None)):
        for ws in (slice(0, -ww), slice(-ww, -sw), slice(-sw, None)):
            img[hs, ws] = cnt
            cnt += 1
    win = img.reshape(splits, wh, splits, ww).transpose(0, 2, 1, 3).reshape(splits * splits, wh * ww)
    diff = win[:, None, :] - win[:, :, None]
    return np.where(diff != 0, -100.0, 0.0).astype(np.float32)


def _windows(x, splits: int):
    """[N, h, w, ...] -> [N, K*K, h/K * w/K, ...] (split_feature, channel_last)."""
    n, h, w = x.shape[:3]
    rest = x.shape[3:]
    x = x.reshape((n, splits, h // splits, splits, w // splits) + rest)
    x = jnp.moveaxis(x, 3, 2)  # [N, K, K, h/K, w/K, ...]
    return x.reshape((n, splits * splits, (h // splits) * (w // splits)) + rest)


def _merge(x, splits: int, h: int, w: int):
    """Inverse of `_windows` for [N, K*K, Lw, C]."""
    n, c = x.shape[0], x.shape[-1]
    x = x.reshape(n, splits, splits, h // splits, w // splits, c)
    return jnp.moveaxis(x, 2, 3).reshape(n, h, w, c)


def window_attention(q, k, v, splits: int, shift: bool):
    """Single-head split-window attention. q [N, h, w, C]; k, v [N, M, h, w, C] -> [N, h, w, C].

    Keys of the M views inside a window are concatenated token-major (token, view), as the official
    code lays them out; its shift mask is tiled view-major (`attn_mask.repeat(b, 1, m)`), so for M > 1
    key j gets the mask of token j mod Lw. We reproduce that exactly (it is what the released weights
    were trained with)."""
    n, h, w, c = q.shape
    m = k.shape[1]
    if shift:
        sh, sw = (h // splits) // 2, (w // splits) // 2
        q = jnp.roll(q, (-sh, -sw), axis=(1, 2))
        k = jnp.roll(k, (-sh, -sw), axis=(2, 3))
        v = jnp.roll(v, (-sh, -sw), axis=(2, 3))
    qw = _windows(q, splits)  # [N, KK, Lw, C]
    kw = _windows(jnp.moveaxis(k, 1, 3), splits)  # [N, KK, Lw, M, C]
    vw = _windows(jnp.moveaxis(v, 1, 3), splits)
    lw = qw.shape[2]
    kw = kw.reshape(n, splits * splits, lw * m, c)
    vw = vw.reshape(n, splits * splits, lw * m, c)
    scores = jnp.einsum("nkqc,nksc->nkqs", qw, kw) / math.sqrt(c)
    if shift:
        scores = scores + jnp.asarray(np.tile(shifted_window_mask(h, w, splits), (1, 1, m)), scores.dtype)
    out = jnp.einsum("nkqs,nksc->nkqc", jax.nn.softmax(scores.astype(jnp.float32), -1).astype(vw.dtype), vw)
    out = _merge(out, splits, h, w)
    if shift:
        out = jnp.roll(out, (sh, sw), axis=(1, 2))
    return out


class TransformerLayer(nn.Module):
    """source + norm(merge(attn(q(source), k(target), v(target)))) [then FFN on [source; message]]."""

    dim: int
    with_ffn: bool
    shift: bool
    splits: int
    ffn_expansion: int = 4
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, source, target):
        """source [N, h, w, C]; target [N, M, h, w, C]."""
        lin = lambda f, name: TorchDense(f, use_bias=False, dtype=self.dtype, kernel_init=XAVIER, name=name)  # noqa: E731
        q = lin(self.dim, "q_proj")(source)
        k = lin(self.dim, "k_proj")(target)
        v = lin(self.dim, "v_proj")(target)
        msg = window_attention(q, k, v, self.splits, self.shift)
        msg = layer_norm("norm1", self.dtype)(lin(self.dim, "merge")(msg))
        if self.with_ffn:
            hid = 2 * self.dim * self.ffn_expansion
            msg = lin(self.dim, "mlp_2")(gelu(lin(hid, "mlp_0")(jnp.concatenate([source, msg], -1))))
            msg = layer_norm("norm2", self.dtype)(msg)
        return source + msg


class MultiViewTransformer(nn.Module):
    """x [B, V, h, w, C] (CNN features), nbr_idx [B, V, M] neighbour views -> [B, V, h, w, C]."""

    dim: int = 128
    layers: int = 6
    splits: int = 2
    ffn_expansion: int = 4
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, nbr_idx):
        b, v, h, w, c = x.shape
        if h % self.splits or w % self.splits:
            raise ValueError(f"multi-view transformer: feature map {h}x{w} not divisible by attn_splits={self.splits}")
        x = add_window_position(x.reshape(b * v, h, w, c), self.splits).reshape(b, v, h, w, c)
        gather = jax.vmap(lambda f, i: f[i])  # [V, ...], [V, M] -> [V, M, ...]
        for i in range(self.layers):
            shift = i % 2 == 1
            # The neighbours' features are those entering the layer (the official code re-batches
            # them once per layer, before the self-attention updates the views).
            tgt = gather(x, nbr_idx).reshape(b * v, nbr_idx.shape[-1], h, w, c)
            src = x.reshape(b * v, h, w, c)
            src = TransformerLayer(self.dim, False, shift, self.splits, self.ffn_expansion, self.dtype,
                                   name=f"layers_{i}_self_attn")(src, src[:, None])
            src = TransformerLayer(self.dim, True, shift, self.splits, self.ffn_expansion, self.dtype,
                                   name=f"layers_{i}_cross_attn_ffn")(src, tgt)
            x = src.reshape(b, v, h, w, c)
        return x


def nearest_views(c2w, num_neighbours: int):
    """Each view's `num_neighbours` nearest cameras by centre distance (excluding itself), as
    DepthSplat's encoder builds `nn_matrix` (when V - 1 <= num_neighbours: all other views in index
    order, as the official code does without nn_matrix). c2w [B, V, 4, 4] -> int32 [B, V, M]."""
    b, v = c2w.shape[:2]
    if v - 1 <= num_neighbours:
        idx = np.array([[j for j in range(v) if j != i] for i in range(v)], np.int32)
        return jnp.broadcast_to(jnp.asarray(idx), (b, v, v - 1))
    centres = c2w[..., :3, 3].astype(jnp.float32)
    d = jnp.linalg.norm(centres[:, :, None] - centres[:, None, :], axis=-1)
    d = d + jnp.eye(v, dtype=d.dtype) * -1.0  # itself first, as the official topk includes it
    _, idx = jax.lax.top_k(-d, num_neighbours + 1)
    return idx[..., 1:].astype(jnp.int32)
