#!/usr/bin/env bash
# Builds everything and runs every test: the C++ tests with ctest (labels unit, reference, cross,
# capi, cli; gpu tests skip without a GPU), then installs the Python package into .venv with pip
# and runs pytest (the pyrocko comparison included).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
cmake --preset cpu -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build --preset cpu
ctest --preset cpu -j 2
python -m pip install -q .
python -m pytest tests/python -q -ra
