"""The viewer (`experiments.view`) in a real browser: headless Chromium opens the page of the tiny
trained run, the predicted splats appear (the 3D canvas differs from the same view with the splats
hidden), a camera move changes the picture, and the panel with locojax's own render of the browser's
camera is not blank, shows in the page and changes with the camera. The server listens on 127.0.0.1
and is stopped at the end."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from browser import headless_chromium, screenshot, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def canvas_shot(driver):
    from selenium.webdriver.common.by import By

    canvases = [c for c in driver.find_elements(By.TAG_NAME, "canvas") if c.size["width"] > 100]
    return screenshot(driver, max(canvases, key=lambda c: c.size["width"] * c.size["height"]))


def panel_shot(driver):
    from selenium.webdriver.common.by import By

    images = [im for im in driver.find_elements(By.TAG_NAME, "img") if im.size["width"] >= 64]
    return screenshot(driver, images[0]) if images else None


def differs(a, b, threshold=2.0) -> bool:
    return a is not None and b is not None and a.shape == b.shape and \
        float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean()) > threshold


@pytest.mark.long_running
def test_viewer_in_headless_chromium(tiny_run):
    from experiments.view import Viewer

    viewer = Viewer(str(tiny_run["workdir"]), port=free_port(), render_height=128)
    driver = None
    try:
        assert viewer.host == "127.0.0.1" and viewer.url.startswith("http://127.0.0.1:")
        driver = headless_chromium()
        driver.get(viewer.url)
        wait_for(lambda: viewer.server.get_clients(), 60, "the browser to connect")
        client = list(viewer.server.get_clients().values())[0]
        # Server-side panel: rendered from the browser's camera (the first render may come from the
        # page's default camera, before the viewer's first view reaches it, and see nothing).
        wait_for(lambda: viewer.panel_count >= 1 and viewer.panel_image.std() > 3, 120,
                 "a non-blank locojax render of the browser camera")
        first_panel = viewer.panel_image.copy()

        # The splats: the canvas with them differs from the canvas with them hidden. The 2-step
        # GlobalSplat run's opacities are sigmoid(-5) = 0.0067 (the paper's logit offset), below what
        # a browser draws: the display-only opacity gain makes them visible (the panel is unaffected).
        viewer.opacity_gain.value = 100.0
        def splats_drawn():
            shot = canvas_shot(driver)
            viewer.splats.visible = False
            import time
            time.sleep(1.0)
            hidden = canvas_shot(driver)
            viewer.splats.visible = True
            time.sleep(1.0)
            return (shot, hidden) if differs(shot, hidden, 1.0) else None

        with_splats, without = wait_for(splats_drawn, 120, "the splats to be drawn", poll=1.0)
        assert with_splats.std() > 5

        def panel_in_page():
            shot = panel_shot(driver)
            return shot if shot is not None and shot.std() > 3 else None

        shown_panel = wait_for(panel_in_page, 60, "the render panel in the page")

        # Move the camera to another context camera: the 3D view and the panel both change.
        count = viewer.panel_count
        viewer.move_camera(client, _rotated(viewer.context_c2w[-1], 25.0))
        wait_for(lambda: viewer.panel_count > count and differs(viewer.panel_image, first_panel), 120,
                 "the panel to follow the camera")
        assert viewer.panel_image.std() > 3
        wait_for(lambda: differs(canvas_shot(driver), with_splats), 60, "the 3D view to follow the camera", poll=1.0)
        wait_for(lambda: differs(panel_shot(driver), shown_panel), 60, "the page's panel to update", poll=1.0)
    finally:
        if driver is not None:
            driver.quit()
        viewer.stop()
    with socket.socket() as s:  # nothing listens on the port any more (TIME_WAIT connections may remain)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", viewer.port))


def _rotated(c2w, degrees: float):
    """c2w turned by `degrees` about its own y axis (a pan)."""
    a = np.deg2rad(degrees)
    R = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    out = np.array(c2w, np.float64)
    out[:3, :3] = out[:3, :3] @ R
    return out
