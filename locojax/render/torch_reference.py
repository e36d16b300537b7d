"""PyTorch reference renderer built from gsplat 1.5.3's pure-torch pieces (tests and benchmarks only;
torch and gsplat are imported lazily, the library never needs them).

gsplat's public `rasterization` JIT-compiles CUDA, so this assembles its CPU-capable functions from
`gsplat.cuda._torch_impl` (`_quat_scale_to_covar_preci`, `_fully_fused_projection`,
`_spherical_harmonics`, `_isect_tiles`, `_isect_offset_encode`) with a compositor that follows
`RasterizeToPixels3DGSFwd.cu`: per tile, the depth-sorted list is walked front to back for all the
tile's pixels at once. Two compositors:
  * `composite_sequential`: one step per list entry, literally the kernel's loop (tiny scenes);
  * `composite_cumprod`: the same rule vectorised per tile with a cumulative product (benchmark).
"""

from __future__ import annotations

import math


def _torch():
    import torch

    return torch


def project_torch(means, quats, scales, opacities, sh, viewmat, K, *, width, height, sh_degree,
                  near=0.01, far=1e10, eps2d=0.3):
    """gsplat's torch projection for one camera -> (radii [N,2], means2d, depths, conics, colors)."""
    torch = _torch()
    from gsplat.cuda._torch_impl import (_fully_fused_projection, _quat_scale_to_covar_preci,
                                         _spherical_harmonics)

    covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False, triu=False)
    radii, means2d, depths, conics, _ = _fully_fused_projection(
        means, covars, viewmat[None], K[None], width, height, eps2d=eps2d, near_plane=near, far_plane=far)
    campos = torch.inverse(viewmat)[:3, 3]
    colors = _spherical_harmonics(sh_degree, means - campos, sh[:, : (sh_degree + 1) ** 2])
    colors = torch.clamp_min(colors + 0.5, 0.0)
    return radii[0], means2d[0], depths[0], conics[0], colors


def isect_torch(means2d, radii, depths, *, width, height, tile_size, use_gsplat=True):
    """Tile lists: (offsets [T] int64 starts, flatten_ids [M] sorted by (tile, depth)).

    use_gsplat=True calls gsplat's (Python-loop) `_isect_tiles`; False is a vectorised equivalent.
    """
    torch = _torch()
    from gsplat.cuda._torch_impl import _isect_offset_encode, _isect_tiles

    tiles_x, tiles_y = math.ceil(width / tile_size), math.ceil(height / tile_size)
    if use_gsplat:
        _, isect_ids, flatten_ids = _isect_tiles(means2d[None].detach(), radii[None], depths[None].detach(),
                                                 tile_size, tiles_x, tiles_y)
    else:
        with torch.no_grad():
            m, r = means2d.detach() / tile_size, radii.float() / tile_size
            lo = torch.floor(m - r).int()
            hi = torch.ceil(m + r).int()
            lo[:, 0].clamp_(0, tiles_x); hi[:, 0].clamp_(0, tiles_x)
            lo[:, 1].clamp_(0, tiles_y); hi[:, 1].clamp_(0, tiles_y)
            span = (hi - lo) * (radii > 0).all(-1, keepdim=True)
            count = (span[:, 0] * span[:, 1]).long()
            gid = torch.repeat_interleave(torch.arange(len(count)), count)
            start = torch.cumsum(count, 0) - count
            local = torch.arange(int(count.sum())) - start[gid]
            w = span[gid, 0].clamp_min(1).long()
            tile = (lo[gid, 1] + local // w) * tiles_x + lo[gid, 0] + local % w
            depth_bits = depths.detach()[gid].view(torch.int32).long() & 0xFFFFFFFF
            isect_ids, order = torch.sort((tile.long() << 32) | depth_bits)
            flatten_ids = gid[order].int()
    offsets = _isect_offset_encode(isect_ids, 1, tiles_x, tiles_y).flatten().long()
    return offsets, flatten_ids.long()


def _tile_pixels(torch, t, tiles_x, tile_size, width, height):
    ty, tx = divmod(t, tiles_x)
    ys, xs = torch.meshgrid(torch.arange(tile_size), torch.arange(tile_size), indexing="ij")
    xs, ys = xs.flatten() + tx * tile_size, ys.flatten() + ty * tile_size
    keep = (xs < width) & (ys < height)
    return xs[keep], ys[keep]


def composite_torch(means2d, conics, opacities, colors, depths, offsets, flatten_ids, *, width, height,
                    tile_size, sequential=False):
    """Blend the tile lists -> (rgb [H,W,3] without background, accumulated z [H,W], T_final [H,W])."""
    torch = _torch()
    tiles_x = math.ceil(width / tile_size)
    num_tiles = offsets.shape[0]
    ends = torch.cat([offsets[1:], torch.tensor([flatten_ids.shape[0]])])
    feats = torch.cat([colors, depths[:, None]], -1)  # [N, 4]
    out_rgbz = torch.zeros(height * width, 4, dtype=means2d.dtype)
    out_t = torch.ones(height * width, dtype=means2d.dtype)
    rows_rgbz, rows_t, rows_pix = [], [], []
    for t in range(num_tiles):
        xs, ys = _tile_pixels(torch, t, tiles_x, tile_size, width, height)
        ids = flatten_ids[offsets[t]:ends[t]]
        if ids.numel() == 0:
            continue
        px, py = xs.to(means2d.dtype) + 0.5, ys.to(means2d.dtype) + 0.5
        m, c, o, f = means2d[ids], conics[ids], opacities[ids], feats[ids]
        dx = m[:, 0:1] - px[None]
        dy = m[:, 1:2] - py[None]
        sigma = 0.5 * (c[:, 0:1] * dx * dx + c[:, 2:3] * dy * dy) + c[:, 1:2] * dx * dy  # [L, P]
        alpha = torch.clamp_max(o[:, None] * torch.exp(-sigma), 0.999)
        valid = (sigma >= 0) & (alpha >= 1.0 / 255.0)
        if sequential:  # the CUDA kernel's loop, all pixels of the tile in lock step
            T = torch.ones_like(px)
            done = torch.zeros_like(px, dtype=torch.bool)
            acc = torch.zeros(px.shape[0], 4, dtype=means2d.dtype)
            for i in range(ids.shape[0]):
                a = alpha[i]
                next_t = T * (1.0 - a)
                step = valid[i] & ~done
                stop = step & (next_t <= 1e-4)
                done = done | stop
                use = step & ~stop
                acc = acc + torch.where(use[:, None], (a * T)[:, None] * f[i][None], 0.0)
                T = torch.where(use, next_t, T)
            rgbz, t_final = acc, T
        else:
            one_minus = torch.where(valid, 1.0 - alpha, torch.ones_like(alpha))
            t_incl = torch.cumprod(one_minus, 0)
            used = valid & (t_incl > 1e-4)
            w = torch.where(used, alpha * (t_incl / one_minus), torch.zeros_like(alpha))
            rgbz = w.T @ f
            t_final = torch.where(used, one_minus, torch.ones_like(one_minus)).prod(0)
        rows_rgbz.append(rgbz); rows_t.append(t_final); rows_pix.append(ys * width + xs)
    if rows_pix:
        pix = torch.cat(rows_pix)
        out_rgbz = out_rgbz.index_put((pix,), torch.cat(rows_rgbz))
        out_t = out_t.index_put((pix,), torch.cat(rows_t))
    return out_rgbz[:, :3].reshape(height, width, 3), out_rgbz[:, 3].reshape(height, width), \
        out_t.reshape(height, width)


def render_torch(means, quats, scales, opacities, sh, viewmat, K, *, width, height, sh_degree, background=None,
                 near=0.01, far=1e10, eps2d=0.3, tile_size=16, sequential=False, use_gsplat_isect=True):
    """Full torch render of one camera -> dict(rgb [H,W,3], depth [H,W,1] "ED", alpha [H,W,1])."""
    torch = _torch()
    radii, means2d, depths, conics, colors = project_torch(
        means, quats, scales, opacities, sh, viewmat, K, width=width, height=height, sh_degree=sh_degree,
        near=near, far=far, eps2d=eps2d)
    offsets, flatten_ids = isect_torch(means2d, radii, depths, width=width, height=height,
                                       tile_size=tile_size, use_gsplat=use_gsplat_isect)
    rgb, zacc, t_final = composite_torch(means2d, conics, opacities, colors, depths, offsets, flatten_ids,
                                         width=width, height=height, tile_size=tile_size, sequential=sequential)
    alpha = (1.0 - t_final)[..., None]
    if background is not None:
        rgb = rgb + t_final[..., None] * background
    depth = zacc[..., None] / alpha.clamp(min=1e-10)
    return dict(rgb=rgb, depth=depth, alpha=alpha)
