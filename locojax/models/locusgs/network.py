"""TokenGS / LocusGS network (the LocusGS paper; official nv-tlabs/TokenGS and leo-frank/LocusGS code).

    net = LocusNet(cfg)
    layers = net.apply({"params": p}, images, c2w_rel, K_norm)   # one LayerOut per supervised layer

images [B, V, H, W, 3] in [0, 1]; c2w_rel [B, V, 4, 4] relative to context view 0; K_norm [B, V, 3, 3].
Anchors off (TokenGS): tokens only, head position sign*expm1(x) + (0, 0, 1).
Anchors on (LocusGS): every token carries (mu [3], rho [1]) in float32 (also under bf16 compute); a
sine PE of mu feeds self-attention, an anchor-to-ray bias (eq. 24) feeds cross-attention, shared
heads refine (mu, rho) after every layer, centres are mu + r * sign*expm1(x).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.attention import multihead_attention
from locojax.models.common.layers import (HeadLayerNorm, LayerScale, Mlp, SelfAttention, SelfAttentionBlock,
                                          TorchConv, TorchDense, dense, gelu, layer_norm)
from locojax.models.common.scan_blocks import (functional, scan_blocks, scan_layers, stack_block_params,
                                               tap_stride)
from locojax.models.common.rays import patch_pooled_rays, plucker_rays, point_to_ray_distance

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RHO0 = 0.5413  # inverse softplus of r0 = 1 (official init)
HEAD_CHANNELS = 14  # pos 3, rgb 3, scale 3, quat 4, opacity 1 (official layout)


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """The network's configuration: `config.model`'s architecture keys (`locojax.models.locusgs.config.
    ModelConfig` documents them and holds their defaults; `NetConfig.from_model` copies them) plus the
    official module's fixed constants and the compute settings."""

    dim: int
    heads: int
    patch: int
    encoder_layers: int
    decoder_layers: int
    num_tokens: int
    gaussians_per_token: int
    encoder_layer_scale: float
    decoder_layer_scale: float
    supervised_layers: tuple              # 1-based decoder layers whose Gaussians are decoded
    anchors: bool                         # LocusGS (True) / TokenGS (False)
    refine_radius: bool
    anchor_self_pe: bool
    anchor_cross_bias: bool
    radius_in_bias: bool
    anchored_centres: bool
    head_xy_grid: float
    unused_params: bool
    mlp_ratio: float = 4.0
    pe_per_axis: int = 128
    pe_temperature: float = 10000.0
    sigma_ratio: float = 0.1
    sigma2_floor: float = 1e-3
    bias_clamp: float = 20.0
    gamma_init: float = -2.25
    dtype: Any = jnp.float32
    query_chunk: Any = None               # queries per attention chunk; None: unchunked
    attention_impl: Any = None
    scan_layers: bool = False             # True: encoder / decoder layers as one jax.lax.scan each (same
                                          # params; slower XLA:CPU compile, see docs/performance.md)

    @classmethod
    def from_model(cls, m, **compute) -> "NetConfig":
        """`m`: a `ModelConfig`; `compute`: dtype / query_chunk / attention_impl."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in dataclasses.asdict(m).items() if k in names}, **compute)


class LayerOut(NamedTuple):
    raw: jax.Array      # [B, N, G, 14] head output (float32)
    mu: jax.Array       # [B, N, 3] anchors after this layer's update (zeros when anchors are off)
    radius: jax.Array   # [B, N] r = max(softplus(rho), 1e-3)
    bias: jax.Array     # [B, N, R] the cross-attention bias map this layer used (before gamma), 0 if none


POS_MAX = 1000.0  # the official pos_act clamps its input to +-100 and its output to +-1000


def pos_act(x):
    """sign(x) * expm1(|x|) clamped to +-1000 (official `ClipActivationHead.pos_act`, LocusGS code).

    Clamping |x| at log1p(1000) gives the same values as the code's clamp(x, +-100) -> expm1 ->
    clamp(+-1000) but keeps gradients finite (expm1(100) overflows float32 there)."""
    return jnp.sign(x) * jnp.expm1(jnp.minimum(jnp.abs(x), math.log1p(POS_MAX)))


def radius_of(rho):
    return jnp.maximum(jax.nn.softplus(rho), 1e-3)


def sine_pe(mu, per_axis: int, temperature: float):
    """DAB-DETR sine PE of clip((tanh(mu) + 1) / 2, 0, 1) * 2 pi: [..., 3] -> [..., 3 * per_axis]
    (official `gen_sineembed_for_3d_anchor`, including its eps 1e-6 on the frequencies)."""
    x = jnp.clip((jnp.tanh(mu) + 1.0) * 0.5, 0.0, 1.0) * (2.0 * math.pi)
    i = jnp.arange(per_axis, dtype=jnp.float32)
    dim_t = temperature ** (2.0 * jnp.floor(i / 2.0) / per_axis)
    p = x[..., None] / (dim_t + 1e-6)  # [..., 3, per_axis]
    p = jnp.stack([jnp.sin(p[..., 0::2]), jnp.cos(p[..., 1::2])], axis=-1).reshape(p.shape)
    return p.reshape(p.shape[:-2] + (3 * per_axis,))


def ray_bias(mu, radius, rays, *, sigma_ratio: float, sigma2_floor: float, clamp: float):
    """Eq. 24: mu [B, N, 3], radius [B, N], rays [B, R, 6] (m, d) -> [B, N, R] in [-clamp, 0]."""
    d = point_to_ray_distance(mu.astype(jnp.float32), rays.astype(jnp.float32))
    sigma2 = jnp.maximum((sigma_ratio * radius) ** 2, sigma2_floor)
    return jnp.clip(-d ** 2 / (2.0 * sigma2[..., None]), -clamp, 0.0)


class DecoderLayer(nn.Module):
    cfg: NetConfig

    @nn.compact
    def __call__(self, x, k, v, mu=None, bias=None):
        c, dt = self.cfg, self.cfg.dtype
        # cross-attention: LN -> q_proj -> per-head q LN -> attention(+bias) -> out_proj
        q = HeadLayerNorm(c.heads, dt, name="q_norm")(
            TorchDense(c.dim, dtype=dt, name="q_proj")(layer_norm("norm_cross", dt)(x)))
        out = multihead_attention(q, k, v, c.heads, bias=bias, implementation=c.attention_impl,
                                  query_chunk=c.query_chunk)
        x = x + LayerScale(c.dim, c.decoder_layer_scale, name="ls_cross")(
            TorchDense(c.dim, dtype=dt, name="out_proj")(out))
        # self-attention; LocusGS adds the anchor PE before the LN only (the residual keeps x)
        h = x
        if c.anchors:
            pe_mlp = Mlp(c.dim, c.dim, dt, out_dim=c.dim, name="pe_mlp")
            if c.anchor_self_pe:
                h = h + pe_mlp(sine_pe(mu, c.pe_per_axis, c.pe_temperature).astype(dt))
            else:  # keep the parameters (so counts/checkpoints agree), unused
                pe_mlp(jnp.zeros(x.shape[:-1] + (3 * c.pe_per_axis,), dt))
        h = SelfAttention(c.dim, c.heads, dt, c.attention_impl, c.query_chunk, qk_norm=True,
                          name="self_attn")(layer_norm("norm_self", dt)(h))
        x = x + LayerScale(c.dim, c.decoder_layer_scale, name="ls_self")(h)
        h = Mlp(c.dim, int(c.dim * c.mlp_ratio), dt, name="mlp")(layer_norm("norm_mlp", dt)(x))
        x = x + LayerScale(c.dim, c.decoder_layer_scale, name="ls_mlp")(h)
        if c.unused_params:
            for name in ("unused_norm_a", "unused_norm_b"):
                layer_norm(name)(jnp.zeros((1, c.dim)))
            for name in ("unused_head_norm_a", "unused_head_norm_b"):
                HeadLayerNorm(c.heads, name=name)(jnp.zeros((1, 1, c.dim)))
            self.param("unused_tau_sample", nn.initializers.ones, (), jnp.float32)
        return x


class LocusNet(nn.Module):
    cfg: NetConfig

    @nn.compact
    def __call__(self, images, c2w_rel, K_norm):
        c, dt = self.cfg, self.cfg.dtype
        b, v, hh, ww, _ = images.shape
        # --- tokenizer: RGB and Plücker patch embeddings, each + LN, summed; views concatenated
        mean, std = jnp.asarray(IMAGENET_MEAN), jnp.asarray(IMAGENET_STD)
        rgb = (images.astype(jnp.float32) - mean) / std
        rays = plucker_rays(c2w_rel, K_norm, hh, ww, layout="moment_first")  # [B, V, H, W, 6]
        conv = lambda name: TorchConv(c.dim, c.patch, c.patch, dtype=dt, name=name)  # noqa: E731
        t = layer_norm("rgb_norm", dt)(conv("rgb_embed")(rgb.astype(dt))) + \
            layer_norm("ray_norm", dt)(conv("ray_embed")(rays.astype(dt)))
        t = t.reshape(b, -1, c.dim)
        # --- encoder
        block = functools.partial(SelfAttentionBlock, c.dim, c.heads, c.mlp_ratio, c.encoder_layer_scale, dt,
                                  c.attention_impl, c.query_chunk, qk_norm=True)
        t, _ = scan_blocks(self, block, [f"encoder_{i}" for i in range(c.encoder_layers)], t,
                           out_every=c.encoder_layers, unroll=not c.scan_layers)
        t = layer_norm("encoder_norm", dt)(t)
        kv = TorchDense(2 * c.dim, dtype=dt, name="kv_proj")(t)
        k = HeadLayerNorm(c.heads, dt, name="k_norm")(kv[..., :c.dim])
        vals = kv[..., c.dim:]
        # --- query tokens (and anchors, float32 whatever the compute dtype)
        tokens = self.param("gs_tokens", nn.initializers.normal(0.01), (c.num_tokens, c.dim), jnp.float32)
        x = jnp.broadcast_to(tokens.astype(dt), (b, c.num_tokens, c.dim))
        if c.anchors:
            def mu_init(key, shape, dtype=jnp.float32):
                return jax.random.normal(key, shape, dtype) + jnp.asarray([0.0, 0.0, 1.0], dtype)
            mu = jnp.broadcast_to(self.param("anchor_mu", mu_init, (c.num_tokens, 3), jnp.float32),
                                  (b, c.num_tokens, 3))
            rho = jnp.broadcast_to(self.param("anchor_rho", nn.initializers.constant(RHO0),
                                              (c.num_tokens, 1), jnp.float32), (b, c.num_tokens, 1))
            patch_rays = patch_pooled_rays(rays, c.patch).reshape(b, -1, 6)
            g = self.param("bias_gamma", nn.initializers.constant(c.gamma_init), (c.decoder_layers,), jnp.float32)
            dmu_head = Mlp(c.dim, c.dim, jnp.float32, out_dim=3, kernel_init=_torch_kernel, name="dmu_head")
            drho_head = Mlp(c.dim, c.dim, jnp.float32, out_dim=1, kernel_init=_torch_kernel, name="drho_head")
        else:
            mu = jnp.zeros((b, c.num_tokens, 3), jnp.float32)
            rho = jnp.full((b, c.num_tokens, 1), RHO0, jnp.float32)
        head = dense(HEAD_CHANNELS * c.gaussians_per_token, "gaussian_head", jnp.float32,
                     kernel_init=nn.initializers.truncated_normal(0.002),
                     bias_init=_head_bias_init(c.gaussians_per_token, c.head_xy_grid))
        def layer_step(layer, dmu, drho, carry, g_i):
            """One decoder layer and the anchors' refinement: (x, mu, rho, bias map) -> the same."""
            x, mu, rho, _ = carry
            bias_map = jnp.zeros((b, c.num_tokens, 1), jnp.float32)
            attn_bias = None
            if c.anchors and c.anchor_cross_bias:
                r = radius_of(rho[..., 0]) if c.radius_in_bias else jnp.ones_like(rho[..., 0])
                bias_map = ray_bias(mu, r, patch_rays, sigma_ratio=c.sigma_ratio,
                                    sigma2_floor=c.sigma2_floor, clamp=c.bias_clamp)
                attn_bias = (jax.nn.softplus(g_i) * bias_map)[:, None]  # one map for all heads
            x = layer(x, k, vals, mu, attn_bias)
            if c.anchors:
                xf = x.astype(jnp.float32)
                mu = mu + pos_act(dmu(xf))
                if c.refine_radius:
                    rho = rho + drho(xf)
                else:
                    drho(xf)  # parameters kept, unused
            return x, mu, rho, bias_map

        n_rays = patch_rays.shape[1] if c.anchors and c.anchor_cross_bias else 1
        carry = (x, mu, rho, jnp.zeros((b, c.num_tokens, n_rays), jnp.float32))
        gammas = g if c.anchors else jnp.zeros((c.decoder_layers,), jnp.float32)
        names = [f"decoder_{i}" for i in range(c.decoder_layers)]
        # carries are kept after every `every`-th layer: all the supervised ones, few others
        every = tap_stride(c.decoder_layers, [s - 1 for s in c.supervised_layers])
        after = {}  # 1-based layer -> carry after it
        if c.scan_layers and not self.is_initializing():
            layer_fn = DecoderLayer(c, parent=None)
            dmu, drho = (functional(self, dmu_head), functional(self, drho_head)) if c.anchors else (None, None)

            def step(cr, p, g_i):
                return layer_step(lambda *a: layer_fn.apply({"params": p}, *a), dmu, drho, cr, g_i)

            _, kept = scan_layers(step, stack_block_params(self, names), carry, gammas, out_every=every)
            for j in range(c.decoder_layers // every):
                after[(j + 1) * every] = jax.tree.map(lambda a: a[j], kept)
        else:  # init (creates every layer's params under its name) and the unrolled reference
            for i, name in enumerate(names):
                carry = layer_step(DecoderLayer(c, name=name), dmu_head if c.anchors else None,
                                   drho_head if c.anchors else None, carry, gammas[i])
                after[i + 1] = carry
        outs = []
        for layer in sorted(set(c.supervised_layers)):  # in layer order, as the loop appended them
            x, mu, rho, bias_map = after[layer]
            raw = head(x.astype(jnp.float32)).reshape(b, c.num_tokens, c.gaussians_per_token, HEAD_CHANNELS)
            outs.append(LayerOut(raw, mu, radius_of(rho[..., 0]), bias_map))
        return outs


def _head_bias_init(gaussians_per_token: int, spread: float):
    """Zero (official) or, for spread s > 0, raw x/y biases whose pos_act is a lateral grid over
    [-s, s]^2 (cell centres), Gaussian k of every token at grid cell k (row-major)."""
    if spread <= 0:
        return nn.initializers.zeros

    def init(key, shape, dtype=jnp.float32):
        n = math.ceil(math.sqrt(gaussians_per_token))
        ticks = (jnp.arange(n, dtype=jnp.float32) + 0.5) / n * 2.0 * spread - spread
        gx, gy = jnp.meshgrid(ticks, ticks, indexing="xy")
        xy = jnp.stack([gx.ravel(), gy.ravel()], -1)[:gaussians_per_token]
        raw_xy = jnp.sign(xy) * jnp.log1p(jnp.abs(xy))  # inverse of sign * expm1
        bias = jnp.zeros((gaussians_per_token, HEAD_CHANNELS), jnp.float32).at[:, 0:2].set(raw_xy)
        return bias.reshape(shape).astype(dtype)
    return init


def _torch_kernel(key, shape, dtype=jnp.float32):
    """torch nn.Linear default kernel init (the refinement heads keep torch's default)."""
    return nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")(key, shape, dtype)
