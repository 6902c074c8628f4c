#!/usr/bin/env bash
# The main job: builds sciproxy and runs `sciproxy demo`, which runs every kernel built so far at a
# default size on every backend present, verifies each against the reference backend and prints
# the performance report. Uses the cuda preset when nvcc and a GPU are both present. Where MPI was
# built in and mpiexec is present, the cases that run on several ranks are run again on 2 ranks
# (rank 0 prints the report, with what the ranks exchanged and their timer table).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then preset=cuda; fi
cmake --preset "$preset" -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build --preset "$preset" --target sciproxy_cli
sciproxy="build/$preset/apps/sciproxy"
PATH="$PWD/.venv/bin:$PATH" "$sciproxy" demo "$@"
if command -v mpiexec >/dev/null 2>&1 && "$sciproxy" info | grep -q "^  mpi        Open MPI"; then
  echo
  echo "=== on 2 MPI ranks (mpiexec -n 2 sciproxy demo) ==="
  # More ranks than cores are allowed; as root (containers) Open MPI asks for consent.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH="$PWD/.venv/bin:$PATH" \
    mpiexec -n 2 --oversubscribe --mca btl self,vader "$sciproxy" demo --reps 2
fi
