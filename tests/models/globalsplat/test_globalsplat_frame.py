"""Rendering in GlobalSplat's canonical frame (the official code) == rendering the Gaussians mapped to
the world frame (the port) with world cameras, for SH degree 3: means, scales, rotations and the SH
coefficients of degree 1-3 (Wigner rotation) all follow the frame."""

import sys
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import configs
from locojax.geometry.cameras import cameras_from_views
from locojax.geometry.scene_normalization import globalsplat_frame_jax, to_frame_jax
from locojax.models.common.frames import gaussians_from_frame
from locojax.models.globalsplat import build
from locojax.render import rasterize_batch
from locojax.types import Gaussians, Views

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from synthetic_views import arc_cameras, random_views, split_batch  # noqa: E402

H = W = 32


def world_cameras(seed):
    """Arc cameras moved by a random similarity (rotation, translation, scale 2.3)."""
    rng = np.random.default_rng(seed)
    c2w = arc_cameras(5, seed=seed).astype(np.float64)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    out = c2w.copy()
    out[:, :3, :3] = q @ c2w[:, :3, :3]
    out[:, :3, 3] = 2.3 * c2w[:, :3, 3] @ q.T + rng.normal(size=3) * 4
    return out.astype(np.float32)


def views_with(c2w, images):
    v = c2w.shape[1]
    k = np.tile(np.array([[1.0, 0, 0.5], [0, 1.0, 0.5], [0, 0, 1]], np.float32), (1, v, 1, 1))
    return Views(images=images, intrinsics=k, c2w=c2w, near=np.full((1, v), 0.1, np.float32),
                 far=np.full((1, v), 100.0, np.float32), index=np.arange(v, dtype=np.int32)[None] * 3)


def render(g, views):
    return rasterize_batch(g, cameras_from_views(views), width=W, height=H, sh_degree=3,
                           background=jnp.zeros(3), eps2d=0.05)


def test_canonical_and_world_renders_identical_sh3():
    rng = np.random.default_rng(0)
    n = 200
    world = jnp.asarray(world_cameras(1))[None]
    frame, scale = globalsplat_frame_jax(world)
    canon_cams = to_frame_jax(world, frame, scale)
    # Gaussians in front of the canonical cameras, strongly view-dependent (SH rest ~ DC)
    g = Gaussians(
        means=jnp.asarray(rng.uniform([-0.6, -0.4, 1.0], [0.6, 0.4, 2.2], (1, n, 3)), jnp.float32),
        quats=jnp.asarray(rng.normal(size=(1, n, 4)), jnp.float32),
        scales=jnp.asarray(rng.uniform(0.02, 0.08, (1, n, 3)), jnp.float32),
        opacities=jnp.asarray(rng.uniform(0.3, 0.9, (1, n)), jnp.float32),
        sh=jnp.asarray(rng.normal(0, 0.6, (1, n, 16, 3)), jnp.float32),
    )
    images = np.zeros((1, 5, H, W, 3), np.float32)
    canon = render(g, views_with(canon_cams, images))
    moved = render(gaussians_from_frame(g, frame, scale), views_with(world, images))
    assert float(jnp.std(canon.rgb)) > 0.1
    np.testing.assert_allclose(moved.rgb, canon.rgb, atol=2e-4)
    np.testing.assert_allclose(moved.alpha, canon.alpha, atol=2e-4)
    # depth scales with the frame (the model divides it by s for the consistency loss)
    np.testing.assert_allclose(moved.depth, canon.depth * scale[0], rtol=1e-3, atol=1e-4)
    # negative control: without the Wigner rotation of degrees 1-3 the renders differ
    unrotated = gaussians_from_frame(g.replace(sh=g.sh.at[..., 1:, :].set(0.0)), frame, scale)
    unrotated = unrotated.replace(sh=unrotated.sh.at[..., 1:, :].set(g.sh[..., 1:, :]))
    assert float(jnp.max(jnp.abs(render(unrotated, views_with(world, images)).rgb - canon.rgb))) > 0.05


def test_model_world_input_renders_as_official_canonical_input():
    """The port (normalize_scene="context": world cameras in, world Gaussians out) against the official
    setup (normalize_scene="none": cameras normalised beforehand, Gaussians rendered in that frame).
    SH degree 3 (the tiny preset's is 0): the rest coefficients must turn with the frame."""
    config = configs.get_config("globalsplat_tiny")
    config.model.sh_degree = 3
    base = split_batch(random_views(1, 8, H, W, seed=4), 5)
    world_all = world_cameras(7)[None]  # 5 context cameras of the arc
    ctx_world = views_with(world_all, base.context.images)
    frame, scale = globalsplat_frame_jax(jnp.asarray(world_all))
    ctx_canon = views_with(np.asarray(to_frame_jax(jnp.asarray(world_all), frame, scale)), base.context.images)
    model = build(config)
    params = model.init(jax.random.PRNGKey(0), base)
    outs = []
    for mode, views in (("context", ctx_world), ("none", ctx_canon)):
        config.model.normalize_scene = mode
        m = build(config)
        pred = m.predict(params, jax.tree_util.tree_map(jnp.asarray, views), step=jnp.int32(10_000), train=False)
        outs.append((pred, views))
    (pw, vw), (pc, vc) = outs
    # the targets: the context cameras themselves, in each frame
    rw, rc = render(pw.gaussians, vw), render(pc.gaussians, vc)
    assert float(jnp.max(rw.alpha)) > 0.05
    np.testing.assert_allclose(rw.rgb, rc.rgb, atol=2e-4)
    np.testing.assert_allclose(pw.aux["frame_scale"], scale, rtol=1e-6)
    np.testing.assert_allclose(pc.aux["frame_scale"], 1.0)
    np.testing.assert_allclose(pw.aux["frustum"], pc.aux["frustum"], rtol=1e-4, atol=1e-6)


def test_data_scene_frame_is_the_official_union_normalisation(fixtures_dir):
    """`data.scene_frame="globalsplat"` reproduces the official `scene_normalize_c2w` outputs of the
    fixture (context = first two cameras, target = the third); padded targets do not move the frame."""
    import pytest

    from data_pipelines.scene_frame import apply_scene_frame
    from locojax.types import Batch

    io = np.load(fixtures_dir / "globalsplat" / "globalsplat_tiny_io.npz")
    raw = io["raw_c2w"].astype(np.float32)
    imgs = np.zeros((1, 3, 4, 4, 3), np.float32)

    def views(c2w, index):
        v = c2w.shape[0]
        return Views(images=imgs[:, :v], intrinsics=np.tile(np.eye(3, dtype=np.float32), (1, v, 1, 1)),
                     c2w=c2w[None], near=np.full((1, v), 0.5, np.float32), far=np.full((1, v), 15.0, np.float32),
                     index=np.asarray(index, np.int32)[None])

    batch = Batch(context=views(raw[:2], [0, 5]), target=views(raw[2:], [3]), scene_id=np.zeros(1, np.int32))
    out = apply_scene_frame(batch, "globalsplat")
    got = np.concatenate([out.context.c2w[0], out.target.c2w[0]])
    np.testing.assert_allclose(got, io["normalized_c2w"], atol=2e-6)
    np.testing.assert_allclose(out.context.near, 0.5 / io["scene_scale"], rtol=1e-6)
    padded = Batch(context=batch.context, target=views(np.stack([raw[2], raw[0]]), [3, -1]),
                   scene_id=batch.scene_id)
    np.testing.assert_allclose(apply_scene_frame(padded, "globalsplat").target.c2w[0, 0], io["normalized_c2w"][2],
                               atol=2e-6)
    assert apply_scene_frame(batch, "none") is batch
    with pytest.raises(ValueError, match="config.data.scene_frame='union'"):
        apply_scene_frame(batch, "union")
