#!/usr/bin/env bash
# The main job: builds sciproxy and runs `sciproxy demo`, which runs every kernel built so far at a
# default size on every backend present, verifies each against the reference backend and prints
# the performance report. Uses the cuda preset when nvcc and a GPU are both present.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then preset=cuda; fi
cmake --preset "$preset" -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build --preset "$preset" --target sciproxy_cli
PATH="$PWD/.venv/bin:$PATH" "build/$preset/apps/sciproxy" demo "$@"
