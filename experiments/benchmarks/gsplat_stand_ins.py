"""Stand-ins for `gsplat.rasterization` (CUDA) used when official PyTorch code trains on this CPU
machine (`globalsplat_official_train.py`, `tokengs_official_train.py`).

    rasterization = jax_rasterization(torch)    # the project's JAX rasterizer as a torch autograd op
    rasterization = torch_rasterization(torch)  # gsplat 1.5.3's torch pieces (locojax.render.torch_reference)

Both take gsplat 1.5.3's keyword arguments for the subset the official codes call: pinhole cameras,
`packed=False`, render_mode "RGB" or "RGB+ED", colours either as SH coefficients [..., N, K, 3] with
`sh_degree` or, with `sh_degree=None`, as RGB [..., N, 3] (gsplat uses them as given; here they become
the DC coefficient (rgb - 0.5) / C0 of degree 0, which renders the same colour for rgb >= 0), an
optional `backgrounds` [..., C, 3] (no gradient), near/far planes and eps2d. Inputs are batched
[B, N, ...] with cameras [B, C, 4, 4] (GlobalSplat) or unbatched [N, ...] with [C, 4, 4] (TokenGS).
Returns (render_colors [..., C, H, W, 3 or 4], render_alphas [..., C, H, W, 1], info) with
info["means2d"] = zeros [..., C, N, 2] and no gradient: neither official training loss that runs here
reads it (TokenGS 2026.6 projects the centres itself for its visibility loss; GlobalSplat ignores
info), and a loss that did would see zeros, not gsplat's values.
"""

from __future__ import annotations

import functools

import numpy as np

SH_C0 = 0.28209479177387814  # gsplat's degree-0 SH constant


def _primitives(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, sh_degree, packed,
                render_mode, camera_model):
    """gsplat's keyword arguments -> (batched, SH degree, (means, quats, scales, opacities, SH, viewmats,
    Ks, backgrounds) each with a leading batch axis); plain RGB colours become the DC coefficient."""
    if packed or camera_model != "pinhole" or render_mode not in ("RGB", "RGB+ED"):
        raise ValueError(f"stand-in rasterization supports packed=False, pinhole, RGB/RGB+ED; got packed={packed}, "
                         f"camera_model={camera_model!r}, render_mode={render_mode!r}")
    batched = means.ndim == 3
    if sh_degree is None:  # plain RGB colours -> the DC coefficient that renders them
        colors, sh_degree = ((colors - 0.5) / SH_C0).unsqueeze(-2), 0
    if backgrounds is not None:
        backgrounds = backgrounds.detach().to(means.dtype)
    prim = (means, quats, scales, opacities, colors, viewmats, Ks, backgrounds)
    if not batched:
        prim = tuple(None if a is None else a.unsqueeze(0) for a in prim)
    return batched, int(sh_degree), prim


def _outputs(torch, rgb, depth, alpha, means, viewmats, render_mode):
    colors = torch.cat([rgb, depth], -1) if render_mode == "RGB+ED" else rgb
    info = {"means2d": means.new_zeros(viewmats.shape[:-2] + (means.shape[-2], 2))}
    return colors, alpha, info


def jax_rasterization(torch):
    """`gsplat.rasterization` computed by the project's JAX rasterizer (`locojax.render.rasterize_batch`,
    held to gsplat's torch pieces by tests/render/test_rasterize_vs_gsplat.py) as a
    `torch.autograd.Function`: forward and VJP are jitted per Gaussian count. Capacities are exact
    (every Gaussian may touch every tile: no pair can overflow; the overflow count is kept in
    `rasterization.overflow["pairs"]` anyway). Why: once Gaussians cover whole 64x64 images gsplat's
    torch compositor costs 15-30 s a step on the 2-core CPU."""
    import jax
    import jax.numpy as jnp

    from locojax.render.rasterize import rasterize_batch
    from locojax.types import Camera, Gaussians

    static = ("width", "height", "sh_degree", "near", "far", "eps2d")

    @functools.partial(jax.jit, static_argnames=static)
    def render(prim, viewmats, Ks, background, *, width, height, sh_degree, near, far, eps2d):
        n = prim[0].shape[1]
        tiles = -(-width // 16) * -(-height // 16)
        out = rasterize_batch(Gaussians(*prim), Camera(viewmat=viewmats, K=Ks), width=width, height=height,
                              sh_degree=sh_degree, background=background, near=near, far=far, eps2d=eps2d,
                              tile_size=16, max_pairs=max(n * tiles, 1), tile_capacity=max(n, 1))
        return (out.rgb, out.depth, out.alpha), out.overflow.sum()

    @functools.partial(jax.jit, static_argnames=static)
    def render_vjp(prim, viewmats, Ks, background, cot, **kw):
        _, vjp = jax.vjp(lambda p: render(p, viewmats, Ks, background, **kw)[0], prim)
        return vjp(cot)[0]

    to_j = lambda t: None if t is None else jnp.asarray(t.detach().cpu().numpy())  # noqa: E731
    to_t = lambda a: torch.from_numpy(np.array(a))  # noqa: E731
    overflow = {"pairs": 0}

    class Raster(torch.autograd.Function):
        @staticmethod
        def forward(ctx, means, quats, scales, opacities, sh, viewmats, Ks, background, kw):
            prim = tuple(to_j(t) for t in (means, quats, scales, opacities, sh))
            cams = to_j(viewmats), to_j(Ks), to_j(background)
            (rgb, depth, alpha), over = render(prim, *cams, **kw)
            overflow["pairs"] += int(over)
            ctx.saved = prim, cams, kw
            return to_t(rgb), to_t(depth), to_t(alpha)

        @staticmethod
        def backward(ctx, g_rgb, g_depth, g_alpha):
            prim, cams, kw = ctx.saved
            grads = render_vjp(prim, *cams, (to_j(g_rgb), to_j(g_depth), to_j(g_alpha)), **kw)
            return (*(to_t(g) for g in grads), None, None, None, None)

    def rasterization(*, means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                      near_plane=0.01, far_plane=1e10, packed=False, render_mode="RGB", sh_degree=None,
                      backgrounds=None, camera_model="pinhole", eps2d=0.3):
        batched, deg, args = _primitives(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds,
                                         sh_degree, packed, render_mode, camera_model)
        kw = dict(width=int(width), height=int(height), sh_degree=deg, near=float(near_plane), far=float(far_plane),
                  eps2d=float(eps2d))
        rgb, depth, alpha = Raster.apply(*args, kw)
        if not batched:
            rgb, depth, alpha = rgb[0], depth[0], alpha[0]
        return _outputs(torch, rgb, depth, alpha, means, viewmats, render_mode)

    rasterization.overflow = overflow
    return rasterization


def torch_rasterization(torch):
    """`gsplat.rasterization` by `locojax.render.torch_reference.render_torch` (gsplat 1.5.3's torch
    projection / SH / tile intersection with the CUDA kernel's compositing rule), one camera at a time:
    the reference `--check_rasterizer` compares the JAX op against."""
    from locojax.render.torch_reference import render_torch

    def rasterization(*, means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                      near_plane=0.01, far_plane=1e10, packed=False, render_mode="RGB", sh_degree=None,
                      backgrounds=None, camera_model="pinhole", eps2d=0.3):
        batched, deg, prim = _primitives(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds,
                                         sh_degree, packed, render_mode, camera_model)
        m, q, s, o, c, vm, k, b = prim
        rgbs, depths, alphas = [], [], []
        for i in range(m.shape[0]):
            outs = [render_torch(m[i], q[i], s[i], o[i], c[i], vm[i, t], k[i, t], width=width, height=height,
                                 sh_degree=deg, background=None if b is None else b[i, t], near=near_plane,
                                 far=far_plane, eps2d=eps2d, use_gsplat_isect=False) for t in range(vm.shape[1])]
            rgbs.append(torch.stack([o_["rgb"] for o_ in outs]))
            depths.append(torch.stack([o_["depth"] for o_ in outs]))
            alphas.append(torch.stack([o_["alpha"] for o_ in outs]))
        rgb, depth, alpha = torch.stack(rgbs), torch.stack(depths), torch.stack(alphas)
        if not batched:
            rgb, depth, alpha = rgb[0], depth[0], alpha[0]
        return _outputs(torch, rgb, depth, alpha, means, viewmats, render_mode)

    return rasterization
