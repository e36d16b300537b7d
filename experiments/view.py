"""python -m experiments.view --workdir=RUN [--scene=KEY] [--data_dir=OUT] [--dataset=NAME] [--port=8080]
                              [--host=127.0.0.1] [--step=N] [--render_height=256]

An interactive viewer (a viser page, http://HOST:PORT) of what a trained run predicts:

* the predicted Gaussians of the chosen scene as native splats (viser's `add_gaussian_splats`, colours
  from the degree-0 SH term),
* the context cameras as frustums carrying their images,
* a scene selector over every built scene under the data directory (default: the run's own), and
* a panel with locojax's own render (RGB / depth / alpha, through the project's rasterizer) of the
  browser's current camera, so what you see there is exactly what the model renders.

Context views are chosen as `experiments.predict` does (nearest in pose to the middle frame). The
server listens on 127.0.0.1 unless --host says otherwise. Ctrl-C stops it. From a notebook:
`viewer = Viewer(workdir); viewer.url` and `viewer.stop()`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Optional

import numpy as np
from absl import flags

from experiments import cli

RENDER_MODES = ("RGB", "depth", "alpha")


class Viewer:
    """The viser server, its GUI and the render-panel thread for one trained run."""

    def __init__(self, workdir: str, *, data_dir: Optional[str] = None, scene: Optional[str] = None,
                 dataset: Optional[str] = None, host: str = "127.0.0.1", port: int = 8080,
                 step: Optional[int] = None, render_height: int = 256, max_scenes: int = 500):
        import viser

        from data_pipelines import datasets
        from locojax.train.predict_scene import list_scenes, load_predictor

        self.predictor = load_predictor(workdir, step)
        config = self.predictor.config
        self.data_dir = datasets.resolve_data_dir(data_dir, config)
        self.dataset = dataset
        scenes = list_scenes(self.data_dir, config, dataset)
        if not scenes:
            raise ValueError(f"--data_dir={self.data_dir}: no built dataset with scenes")
        self.scenes = {}
        for name, _, key in scenes[:max_scenes]:
            self.scenes.setdefault(f"{key} ({name})", (name, key))
        labels = list(self.scenes)
        if scene is not None:
            matches = [label for label, (_, k) in self.scenes.items() if k == scene]
            if not matches:
                raise ValueError(f"--scene={scene!r} is not under {self.data_dir}; it has: "
                                 f"{', '.join(labels[:10])}{' ...' if len(labels) > 10 else ''}")
            first = matches[0]
        else:
            first = labels[0]
        h, w = self.predictor.image_shape
        self.render_shape = (int(render_height), int(round(render_height * w / h)))
        self._lock = threading.Lock()
        self._gaussians = None
        self._dirty = True
        self._stop = threading.Event()
        self.panel_count = 0          # renders shown in the panel so far
        self.panel_image = None       # the last one (uint8 [H, W, 3])
        self.scene_label = None

        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.host, self.port = host, self.server.get_port()
        gui = self.server.gui
        self.scene_dropdown = gui.add_dropdown("scene", labels, initial_value=first)
        self.mode_dropdown = gui.add_dropdown("locojax render", RENDER_MODES, initial_value="RGB")
        # Display only (the render panel never uses it): GlobalSplat starts its opacity logits at -5
        # (sigmoid 0.0067), so a barely trained run's splats are invisible in the browser without it.
        self.opacity_gain = gui.add_slider("splat opacity x", min=1.0, max=200.0, step=1.0, initial_value=1.0)
        self.status = gui.add_markdown("loading...")
        self.panel = gui.add_image(np.zeros(self.render_shape + (3,), np.uint8), label="locojax render of this camera",
                                   format="png")
        self.scene_dropdown.on_update(lambda _: self.load_scene(self.scene_dropdown.value))
        self.opacity_gain.on_update(lambda _: self._show_splats())
        self.mode_dropdown.on_update(lambda _: self._mark_dirty())
        self.server.on_client_connect(self._on_connect)
        self.load_scene(first)
        self._thread = threading.Thread(target=self._render_loop, name="locojax-view-render", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _mark_dirty(self):
        self._dirty = True

    def load_scene(self, label: str) -> None:
        """Predict scene `label`'s Gaussians and show them with their context cameras."""
        from locojax.io.splats import c2w_to_wxyz_position, splat_arrays
        from locojax.train.predict_scene import find_scene, nearest_in_pose_context, scene_views

        name, key = self.scenes[label]
        p = self.predictor
        ref = find_scene(self.data_dir, key, p.config, name)
        context = nearest_in_pose_context(np.asarray(ref.record["c2w"]), p.num_context)
        views = scene_views(ref, context, p.image_shape, p.near, p.far)
        gaussians = p.predict(views)
        g = {k: np.asarray(getattr(gaussians, k))[0] for k in ("means", "quats", "scales", "opacities", "sh")}
        scene = self.server.scene
        self._splat_arrays = splat_arrays(**g)
        self._show_splats()
        c2w, K = np.asarray(views.c2w[0], np.float64), np.asarray(views.intrinsics[0], np.float64)
        h, w = p.image_shape
        centres = c2w[:, :3, 3]
        spread = float(np.linalg.norm(centres - centres.mean(0), axis=-1).max()) if len(centres) > 1 else 1.0
        scene.set_up_direction(-c2w[:, :3, 1].mean(0))  # OpenCV: the cameras' up is -y
        # The first view: the first context camera pulled back along its axis by half the median distance
        # of the Gaussians from it, so its frustum and the splats in front of it are both in sight.
        dist = np.linalg.norm(g["means"] - c2w[0, :3, 3], axis=-1)
        back = 0.5 * float(np.median(dist[np.isfinite(dist)])) if np.isfinite(dist).any() else 0.0
        self.home_c2w = c2w[0].copy()
        self.home_c2w[:3, 3] -= back * c2w[0, :3, 2]
        self.frustums = []
        for i, frame in enumerate(context):
            wxyz, pos = c2w_to_wxyz_position(c2w[i])
            image = (np.clip(views.images[0, i], 0, 1) * 255 + 0.5).astype(np.uint8)
            self.frustums.append(scene.add_camera_frustum(
                f"/context/{i}", fov=float(2 * np.arctan(0.5 / K[i, 1, 1])), aspect=w / h,
                scale=max(0.05, 0.3 * spread), thickness=0.005 * max(0.05, 0.3 * spread) / 0.3, image=image,
                wxyz=wxyz, position=pos, color=(255, 120, 0)))
        self.context_c2w, self.context_K = c2w, K
        with self._lock:
            self._gaussians = gaussians
            self.scene_label = label
            self._dirty = True
        wxyz, pos = c2w_to_wxyz_position(self.home_c2w)
        self.server.initial_camera.position = pos
        self.server.initial_camera.wxyz = wxyz
        for client in self.server.get_clients().values():
            self.move_camera(client, self.home_c2w)
        self.status.content = (f"**{key}** ({name}), step {p.step}: {g['means'].shape[0]} Gaussians from context "
                               f"frames {context}")

    def _show_splats(self) -> None:
        arrays = dict(self._splat_arrays)
        arrays["opacities"] = np.clip(arrays["opacities"] * float(self.opacity_gain.value), 0.0, 1.0)
        self.splats = self.server.scene.add_gaussian_splats("/splats", **arrays)

    def move_camera(self, client, c2w: np.ndarray) -> None:
        """Point a client's camera as `c2w` (OpenCV camera-to-world)."""
        from locojax.io.splats import c2w_to_wxyz_position

        wxyz, pos = c2w_to_wxyz_position(c2w)
        forward = np.asarray(c2w, np.float64)[:3, 2]
        with client.atomic():
            client.camera.wxyz = wxyz
            client.camera.position = pos
            client.camera.look_at = pos + forward
        self._dirty = True

    def _on_connect(self, client) -> None:
        client.camera.on_update(lambda _: self._mark_dirty())
        self.move_camera(client, self.home_c2w)

    def render_client(self, client) -> np.ndarray:
        """locojax's render (uint8 [H, W, 3], the selected mode) of a client's current camera."""
        from locojax.io.splats import intrinsics_from_fov, wxyz_position_to_c2w
        from locojax.io.video import colorize_depth

        h, w = self.render_shape
        c2w = wxyz_position_to_c2w(client.camera.wxyz, client.camera.position)
        K = intrinsics_from_fov(float(client.camera.fov), w, h)
        with self._lock:
            gaussians = self._gaussians
        rgb, depth, alpha = self.predictor.render(gaussians, c2w, K, (h, w))
        mode = self.mode_dropdown.value
        if mode == "depth":
            out = colorize_depth(depth[None], alpha[None])[0]
        elif mode == "alpha":
            out = np.repeat(alpha[..., None], 3, axis=-1)
        else:
            out = rgb
        return (np.clip(out, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)

    def _render_loop(self) -> None:
        while not self._stop.is_set():
            clients = list(self.server.get_clients().values())
            if not self._dirty or not clients:
                time.sleep(0.05)
                continue
            self._dirty = False
            try:
                image = self.render_client(clients[-1])  # the panel follows the newest client
            except Exception as e:  # keep serving; show what went wrong
                self.status.content = f"render failed: {type(e).__name__}: {e}"
                continue
            self.panel.image = image
            self.panel_image = image
            self.panel_count += 1

    def stop(self) -> None:
        """Stop the render thread and the server (its port is freed)."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.server.stop()


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "a run directory (config.json + checkpoints/) " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("scene", None, "scene key shown first (default: the first one)", flag_values=fv)
    flags.DEFINE_string("data_dir", None, "data directory of the scenes (default: the run's)", flag_values=fv)
    flags.DEFINE_string("dataset", None, "only this dataset's scenes", flag_values=fv)
    flags.DEFINE_integer("port", 8080, "port", lower_bound=0, upper_bound=65535, flag_values=fv)
    flags.DEFINE_string("host", "127.0.0.1", "interface to listen on (0.0.0.0: every interface)", flag_values=fv)
    flags.DEFINE_integer("step", None, "checkpoint step (default: the latest)", flag_values=fv)
    flags.DEFINE_integer("render_height", 256, "height of the locojax render panel", lower_bound=8, flag_values=fv)


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config="none")
    if isinstance(args, int):
        return args
    from data_pipelines.errors import DatasetError
    from locojax.train.checkpoint import CorruptCheckpointError

    with cli.OneLineErrors({(CorruptCheckpointError, DatasetError, FileNotFoundError, ValueError,
                             OSError): 2}) as failed:
        viewer = Viewer(args.workdir, data_dir=args.data_dir, scene=args.scene, dataset=args.dataset,
                        host=args.host, port=args.port, step=args.step, render_height=args.render_height)
    if failed.exit_code:
        return failed.exit_code
    print(f"viewer of {args.workdir} at {viewer.url} (Ctrl-C stops it)", flush=True)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
