#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer (the debug preset, -O1):
# every ctest (unit, reference, cross, the C ABI with its fuzz driver, Fortran, the CLI with its
# interrupt tests), then the Python tests with the extension built sanitized and the sanitizer
# runtimes preloaded into the (unsanitized) Python interpreter. .ci/run runs it after test.sh.
#   scripts/test-sanitized.sh             everything
#   scripts/test-sanitized.sh --ctest     the C++, C, Fortran and CLI tests only
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
python="$PWD/.venv/bin/python"
# The Python extension is built in the same tree; its type stubs are not (generating them
# imports the sanitized module into a Python without the sanitizer runtimes).
cmake --preset debug -DSCIPROXY_PYTHON=ON -DSCIPROXY_PYTHON_STUBS=OFF \
  -DPython3_EXECUTABLE="$python" -DPython_EXECUTABLE="$python" >/dev/null
cmake --build --preset debug
# UBSan stops at the first finding (-fno-sanitize-recover); ASan reports leaks of the C++ tests.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The interrupt tests' bound on the time to stop, for code built without optimisation.
export SCIPROXY_STOP_LIMIT=20
ctest --preset debug -j 2
if [ "${1:-}" = "--ctest" ]; then exit 0; fi

# The package as pip lays it out: the pure-Python layer and the sanitized extension.
package=build/debug/python-package
rm -rf "$package"
mkdir -p "$package"
cp -r python/sciproxy "$package/"
cp build/debug/python/_sciproxy*.so "$package/sciproxy/"
asan="$(gcc -print-file-name=libasan.so)"
ubsan="$(gcc -print-file-name=libubsan.so)"
# CPython keeps its own allocations at exit, which LeakSanitizer would report as leaks.
export ASAN_OPTIONS=detect_leaks=0
export SCIPROXY_SANITIZED_PACKAGE="$PWD/$package"
LD_PRELOAD="$asan $ubsan" PYTHONPATH="$PWD/$package" "$python" -c \
  'import os, sciproxy; assert sciproxy.__file__.startswith(os.environ["SCIPROXY_SANITIZED_PACKAGE"]), sciproxy.__file__; print("test-sanitized: pytest imports", sciproxy.__file__)'
LD_PRELOAD="$asan $ubsan" PYTHONPATH="$PWD/$package" \
  "$python" -m pytest tests/python -q -ra -p no:cacheprovider
