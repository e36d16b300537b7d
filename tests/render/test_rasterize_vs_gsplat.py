"""The tiled JAX rasterizer against gsplat 1.5.3's pure-torch pieces composited in torch like
`RasterizeToPixels3DGSFwd.cu` (locojax.render.torch_reference): images, ED depth, alpha, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gsplat")

from locojax.render import rasterize  # noqa: E402
from locojax.render.torch_reference import isect_torch, project_torch, render_torch  # noqa: E402

try:  # pytest puts this directory on sys.path (no __init__.py here)
    from render_scenes import random_scene, to_jax  # noqa: E402
except ImportError:
    from tests.render.render_scenes import random_scene, to_jax  # noqa: E402

BACKGROUND = np.array([0.2, 0.5, 0.8], np.float32)
LOSS_W = np.array([0.7, -0.4, 1.1], np.float32)


def _jax_loss_and_grads(arrays, viewmat, K, bg, *, width, height, sh_degree, chunk=8):
    g, cam = to_jax(arrays, viewmat, K)

    def loss(g, bg):
        out = rasterize(g, cam, width=width, height=height, sh_degree=sh_degree, background=bg, chunk=chunk)
        l = jnp.sum(out.rgb * LOSS_W) + 0.1 * jnp.sum(out.depth) + 0.5 * jnp.sum(out.alpha)
        return l, out

    (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(g, jnp.asarray(bg))
    return out, grads


def _torch_loss_and_grads(arrays, viewmat, K, bg, *, width, height, sh_degree, sequential=True):
    t = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    tbg = torch.tensor(bg, requires_grad=True)
    out = render_torch(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], torch.tensor(viewmat),
                       torch.tensor(K), width=width, height=height, sh_degree=sh_degree, background=tbg,
                       sequential=sequential)
    loss = (out["rgb"] * torch.tensor(LOSS_W)).sum() + 0.1 * out["depth"].sum() + 0.5 * out["alpha"].sum()
    loss.backward()
    grads = {k: np.zeros_like(v.detach().numpy()) if v.grad is None else v.grad.numpy() for k, v in t.items()}
    grads["background"] = tbg.grad.numpy()
    return {k: v.detach().numpy() for k, v in out.items()}, grads


CASES = [  # (n, width, height, sh_degree, seed)
    (1, 20, 18, 0, 0),
    (24, 33, 40, 1, 1),
    (120, 40, 36, 2, 2),
    (300, 48, 32, 3, 3),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"n{c[0]}_{c[1]}x{c[2]}_sh{c[3]}")
def rendered(request):
    n, width, height, sh_degree, seed = request.param
    arrays, viewmat, K = random_scene(n, width=width, height=height, sh_degree=sh_degree, seed=seed,
                                      spread=0.2 if n == 1 else 1.2, scale=0.4 if n == 1 else 0.12)
    kw = dict(width=width, height=height, sh_degree=sh_degree)
    jout, jgrads = _jax_loss_and_grads(arrays, viewmat, K, BACKGROUND, **kw)
    tout, tgrads = _torch_loss_and_grads(arrays, viewmat, K, BACKGROUND, **kw)
    return jout, jgrads, tout, tgrads


def test_images_match_gsplat(rendered):
    jout, _, tout, _ = rendered
    assert int(jout.overflow) == 0
    assert tout["alpha"].max() > 0.3  # the scene is not empty
    for key in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(np.asarray(getattr(jout, key)), tout[key], atol=1e-4, rtol=0, err_msg=key)


def test_gradients_match_torch_autograd(rendered):
    _, (jg, jbg), _, tg = rendered
    got = {k: np.asarray(getattr(jg, k)) for k in ("means", "quats", "scales", "opacities", "sh")}
    got["background"] = np.asarray(jbg)
    for key, ref in tg.items():
        scale = max(np.abs(ref).max(), 1e-3)
        np.testing.assert_allclose(got[key], ref, atol=2e-4 * scale, rtol=2e-3, err_msg=key)


def test_projection_matches_gsplat():
    arrays, viewmat, K = random_scene(200, width=40, height=30, sh_degree=3, seed=7, spread=1.6,
                                      depth=(-1.0, 6.0))
    from locojax.render import project_gaussians

    g, cam = to_jax(arrays, viewmat, K)
    p = project_gaussians(g, cam, width=40, height=30, sh_degree=3)
    t = {k: torch.tensor(v) for k, v in arrays.items()}
    radii, means2d, depths, conics, colors = project_torch(
        t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], torch.tensor(viewmat), torch.tensor(K),
        width=40, height=30, sh_degree=3)
    vis_t = (radii > 0).all(-1).numpy()
    vis_j = np.asarray((p.radii > 0).all(-1))
    # Ours may cull more (opacity-aware box, as gsplat's CUDA path), never less.
    assert not np.any(vis_j & ~vis_t)
    assert np.all(vis_t[vis_j]) and vis_j.sum() > 50
    for name, a, b in [("means2d", p.means2d, means2d), ("conics", p.conics, conics),
                       ("depths", p.depths, depths), ("colors", p.colors, colors)]:
        a, b = np.asarray(a)[vis_t], b.numpy()[vis_t]
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * np.abs(b).max(), err_msg=name)
    # Our radii never exceed gsplat's 3.33-sigma radii.
    assert np.all(np.asarray(p.radii)[vis_j] <= radii.numpy()[vis_j])


def test_vectorised_torch_reference_matches_gsplat_isect():
    """The benchmark's vectorised torch pieces agree with gsplat's own loops."""
    arrays, viewmat, K = random_scene(80, width=40, height=36, sh_degree=1, seed=4)
    t = {k: torch.tensor(v) for k, v in arrays.items()}
    args = (t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], torch.tensor(viewmat), torch.tensor(K))
    kw = dict(width=40, height=36, sh_degree=1, background=torch.tensor(BACKGROUND))
    ref = render_torch(*args, **kw, sequential=True, use_gsplat_isect=True)
    fast = render_torch(*args, **kw, sequential=False, use_gsplat_isect=False)
    for key in ref:
        np.testing.assert_allclose(fast[key].numpy(), ref[key].numpy(), atol=1e-5, err_msg=key)
    radii, means2d, depths, _, _ = project_torch(*args, width=40, height=36, sh_degree=1)
    o1, f1 = isect_torch(means2d, radii, depths, width=40, height=36, tile_size=16, use_gsplat=True)
    o2, f2 = isect_torch(means2d, radii, depths, width=40, height=36, tile_size=16, use_gsplat=False)
    assert torch.equal(o1, o2) and torch.equal(f1, f2)
