#!/bin/bash
# What to run when a GPU is lent (docs/performance.md): the device benchmark in under 8 minutes.
# Run from the repository root; writes $OUT/device.json and $OUT/device.log ($OUT defaults to .).
# Packages the device image lacks travel as wheels in .whl (docs/performance.md says which).
set -o pipefail
OUT=${OUT:-.}
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || exit 1
fi
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$OUT/device.log"
# --budget-s: no new case starts after 6 minutes; the timeout (7 min 50 s) stops anything past that.
timeout 470 python3 -m experiments.benchmark device --out="$OUT/device.json" --budget-s=360 2>&1 | tee -a "$OUT/device.log"
