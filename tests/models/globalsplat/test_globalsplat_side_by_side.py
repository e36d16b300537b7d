"""The port trains like the official GlobalSplat code (issue 14): the first steps of the recorded
official run (tests/fixtures/globalsplat_train/official_trajectory.npz, made by
make_official_trajectory.py from R-Itk/globalsplat on CPU torch with gsplat's torch pieces), replayed
by the project's own train step from the same converted weights, on the same batches, with the same
objective (2 MSE + VGG-19 perceptual with pixel L1, frustum, decoder reg, subset consistency),
curriculum and schedule.

Float32 noise: the official code against itself with its weights moved by 1e-7 (control_* in the
trajectory) stays within 1e-7 for 9 steps, then drifts (4e-5 at step 11, 3 % at step 30, unrelated
after ~50 steps: the training is chaotic at this size). So only the first steps can be compared
tightly; the 200-step comparison is run by port_trajectory.py and reported, not tested here.
"""

import pathlib
import sys

import numpy as np
import pytest

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "globalsplat_train"
sys.path.insert(0, str(FIXTURE))

import port_trajectory  # noqa: E402

STEPS = 8
pytestmark = pytest.mark.long_running  # ~2 CPU-minutes: one compile of the train step with its VGG-19


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    official = dict(np.load(FIXTURE / "official_trajectory.npz"))
    vgg = port_trajectory.write_vgg(tmp_path_factory.mktemp("vgg") / "vgg19.npz")
    return official, port_trajectory.run_port(official, STEPS, vgg)


def rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)) / np.maximum(np.abs(np.asarray(b)), 1e-12)


def test_first_step_matches_to_float32(runs):
    o, p = runs
    pairs = {"loss": "loss", "l2": "mse", "perceptual": "perceptual", "alpha_l1": "consistency_alpha",
             "depth_l1": "consistency_depth"}
    for ok, pk in pairs.items():  # the consistency terms are small differences of renders: looser
        tol = 1e-5 if ok in ("loss", "l2", "perceptual") else 2e-3
        assert rel(p[pk][0], o[ok][0]) < tol, (ok, p[pk][0], o[ok][0])
    assert rel(1e-2 * p["decoder_reg"][0], o["reg"][0]) < 1e-5  # official reg carries its 1e-2 weight
    np.testing.assert_allclose(1e-2 * p["frustum"][0], o["inview"][0], atol=1e-8)
    assert rel(p["grad_norm"][0], o["grad_norm"][0]) < 1e-4


def test_first_steps_track_the_official_run(runs):
    o, p = runs
    np.testing.assert_allclose(p["lr"], o["lr"][:STEPS], rtol=1e-5)  # LinearLR(1e-3) warm-up, then cosine
    assert float(o["loss"][0] - o["loss"][STEPS - 1]) > 0.3  # it learns over these steps
    # float32-level agreement while the run is well conditioned (official-vs-port drift stays below
    # 1e-3 of the loss over these steps; a wrong term, weight or schedule value moves it by >1e-2)
    assert np.all(rel(p["loss"], o["loss"][:STEPS]) < 1e-3), rel(p["loss"], o["loss"][:STEPS])
    assert np.all(rel(p["mse"], o["l2"][:STEPS]) < 2e-3)
    assert np.all(rel(p["perceptual"], o["perceptual"][:STEPS]) < 2e-3)
    assert np.all(rel(p["grad_norm"], o["grad_norm"][:STEPS]) < 2e-3)
