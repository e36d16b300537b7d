"""The data pipelines read TFDS through its numpy data source: opening a built dataset and drawing a
training batch never imports TensorFlow (its import is seconds of every run's start-up,
docs/performance.md "Warm rerun, end to end")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dp_helpers import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import json, sys
import ml_collections
from data_pipelines import make_train_iterator
from data_pipelines.loading import open_split
config = ml_collections.ConfigDict(json.loads(sys.argv[1]))
source = open_split("synthetic", "test", config=config)
scene = source.scene(0)
batch = next(make_train_iterator(config))
print(json.dumps({"tensorflow": "tensorflow" in sys.modules, "frames": int(scene.images.shape[0]),
                  "batch": list(batch.context.images.shape)}))
"""


def test_reading_a_built_dataset_never_imports_tensorflow(synthetic_dir):
    config = tiny_config(synthetic_dir).to_dict()
    config["data"]["image_shape"] = [64, 64]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(config)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["frames"] == 64 and result["batch"][0] == 2, result
    assert result["tensorflow"] is False
