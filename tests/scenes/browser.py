"""Headless Chromium from Debian's `chromium` / `chromium-driver` packages, driven by selenium with
the system binaries (selenium's own driver download, Selenium Manager, is never used)."""

from __future__ import annotations

import io
import shutil
import time

import numpy as np
from PIL import Image

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_CANDIDATES = ("chromedriver",)


def system_binary(candidates) -> str:
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(f"none of {', '.join(candidates)} on PATH: install Debian's chromium and "
                            f"chromium-driver (`apt-get install -y chromium chromium-driver`, as .ci/run does)")


def headless_chromium(width: int = 1200, height: int = 800):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = system_binary(CHROMIUM_CANDIDATES)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                # WebGL2 without a GPU: SwiftShader, Chromium's software renderer (splats need WebGL2).
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
                "--disable-extensions", "--no-first-run", "--disable-background-networking"):
        options.add_argument(arg)
    service = Service(executable_path=system_binary(DRIVER_CANDIDATES))
    return webdriver.Chrome(options=options, service=service)


def screenshot(driver, element=None) -> np.ndarray:
    """uint8 [H, W, 3] of the page (or one element)."""
    png = (element or driver).screenshot_as_png if element is not None else driver.get_screenshot_as_png()
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


def wait_for(predicate, timeout: float, what: str, poll: float = 0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value is not None and value is not False and not (isinstance(value, (dict, list)) and not value):
            return value
        time.sleep(poll)
    raise TimeoutError(f"waited {timeout:.0f} s for {what}")
