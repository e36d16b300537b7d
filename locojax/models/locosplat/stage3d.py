"""LoCoSplat's 3D stage (paper sec. 2.3, eqs. 2-4) and pointwise head (sec. 2.4), in float32.

    f_prime, grid_overflow = LocalContext(...)(anchors, points, point_features)
    raw = PointwiseHead(hidden, out)(f_prime)                         # [B, N, 38]

LocalContext: u0(a) = W0 f_a (the fine level is the voxelisation itself); for every coarser level l,
u_l(c) = mean of W_l f_i over the points of cell c (box kernel, nearest cell, 0 if empty), read at
the anchor's cell c_l(x_a); f'_a = f_a + g([u0; u1; ...; f_a]). No parameters in the aggregation,
no data-dependent shapes (voxels.cell_average sorts a static N + N rows).

`fine_interp="trilinear"` is Table 5's "trilinear fine level" ablation (sec. 3.5, D.1): u0 is no longer
read from the voxelisation but splatted from the points' W0 f_i with the tent kernel and queried at
the anchor trilinearly, renormalised over occupied nodes (B.1 "Grids", the ablation models' rule;
voxels.trilinear_cell_average, 8 (N + N) static rows). Coarser levels stay nearest-cell.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from locojax.models.common.layers import TorchDense, gelu
from locojax.models.locosplat.anchors import Anchors
from locojax.models.locosplat.config import FINE_INTERPS
from locojax.models.locosplat.voxels import cell_average, trilinear_cell_average

# VolSplat's sparse Gaussian head: kaiming_normal(mode="fan_out", nonlinearity="relu"), no bias
# (common/sparse_net.py). On a pointwise [in, out] kernel fan_out = out.
KAIMING_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def activation(name: str):
    return {"gelu": gelu, "relu": jax.nn.relu}[name]


class LocalContext(nn.Module):
    """anchors (rows [B, N]), points [B, N, 3], point_features [B, N, C] -> (f' [B, N, C],
    grid key overflow [B] int32)."""

    cell_sizes: tuple
    proj_dim: int = 16
    hidden: int = 256
    fusion: bool = True
    act: str = "gelu"
    fine_interp: str = "nearest"  # one of FINE_INTERPS

    @nn.compact
    def __call__(self, anchors: Anchors, points, point_features):
        f = anchors.features.astype(jnp.float32)
        b = f.shape[0]
        overflow = jnp.zeros((b,), jnp.int32)
        if not self.fusion:
            return f, overflow
        if self.fine_interp == "trilinear":  # Table 5 ablation: tent splat of W0 f_i, trilinear query
            proj0 = TorchDense(self.proj_dim, name="proj_0")(point_features.astype(jnp.float32))
            u0, ov = jax.vmap(lambda x, p, q: trilinear_cell_average(x, p, q, self.cell_sizes[0]))(
                points.astype(jnp.float32), proj0, anchors.positions)
            levels, overflow = [u0], overflow + ov
        elif self.fine_interp == "nearest":
            levels = [TorchDense(self.proj_dim, name="proj_0")(f)]  # u0 = W0 f_a (eq. 4)
        else:
            raise ValueError(f"fine_interp={self.fine_interp!r}: expected one of {FINE_INTERPS}")
        for lvl, cell in enumerate(self.cell_sizes[1:], start=1):
            proj = TorchDense(self.proj_dim, name=f"proj_{lvl}")(point_features.astype(jnp.float32))  # W_l f_i
            u, ov = jax.vmap(lambda x, p, q, cell=cell: cell_average(x, p, q, cell))(
                points.astype(jnp.float32), proj, anchors.positions)  # eq. 3 splat, eq. 4 query
            levels.append(u)
            overflow = overflow + ov
        x = jnp.concatenate(levels + [f], axis=-1)
        act = activation(self.act)
        x = act(TorchDense(self.hidden, name="g_0")(x))
        x = act(TorchDense(self.hidden, name="g_1")(x))
        return f + TorchDense(f.shape[-1], name="g_2")(x), overflow  # residual fusion (eq. 4)


class PointwiseHead(nn.Module):
    """h: C -> hidden -> out, pointwise, no bias, kaiming fan-out init (VolSplat's head at its centre
    tap: 99.6% of anchors are isolated, sec. 2.4)."""

    hidden: int = 38
    out: int = 38
    act: str = "gelu"

    @nn.compact
    def __call__(self, x):
        x = TorchDense(self.hidden, use_bias=False, kernel_init=KAIMING_FAN_OUT, name="h_0")(x)
        x = activation(self.act)(x)
        return TorchDense(self.out, use_bias=False, kernel_init=KAIMING_FAN_OUT, name="h_1")(x)
