#!/usr/bin/env bash
# Installs a configured and built sciproxy build tree into a temporary prefix (cmake --install),
# then configures, builds and runs tests/downstream against it (find_package(sciproxy CONFIG),
# C++, C and Fortran callers), and removes the temporary folder.
#
#   scripts/test-install.sh [BUILD_DIR]      default build/cpu; the library (and, where a Fortran
#                                            compiler was found, sciproxy_fortran) must be built
# Environment: SCIPROXY_KEEP_INSTALL=1 keeps the temporary folder and prints where it is.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/cpu}"
build="$(cd "$build" && pwd)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "test-install: $build is not a configured build folder" >&2
  exit 2
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/sciproxy-install.XXXXXX")"
cleanup() {
  if [ "${SCIPROXY_KEEP_INSTALL:-0}" = 1 ]; then
    echo "test-install: kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

# The targets the install needs, if they are not built yet (a no-op after a full build).
targets=(sciproxy)
if grep -q '^CMAKE_Fortran_COMPILER:' "$build/CMakeCache.txt"; then targets+=(sciproxy_fortran); fi
cmake --build "$build" --target "${targets[@]}" >/dev/null

echo "test-install: installing $build into $tmp/prefix"
cmake --install "$build" --prefix "$tmp/prefix" --component development >/dev/null

# Whatever launcher or toolchain the caller's environment names applies downstream too; the
# build's own compilers are used so that the Fortran module matches the compiler reading it.
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
args=(-DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_C_COMPILER="$(cache_value CMAKE_C_COMPILER)"
      -DCMAKE_CXX_COMPILER="$(cache_value CMAKE_CXX_COMPILER)")
fc="$(cache_value CMAKE_Fortran_COMPILER)"
if [ -n "$fc" ]; then
  args+=(-DCMAKE_Fortran_COMPILER="$fc" -DSCIPROXY_DOWNSTREAM_REQUIRE_FORTRAN=ON)
fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

cmake -S "$root/tests/downstream" -B "$tmp/downstream" "${generator[@]}" "${args[@]}" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log" >&2; echo "test-install: configuring tests/downstream failed" >&2; exit 1; }
grep -- '-- sciproxy ' "$tmp/configure.log" || true
cmake --build "$tmp/downstream" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log" >&2; echo "test-install: building tests/downstream failed" >&2; exit 1; }
ctest --test-dir "$tmp/downstream" --output-on-failure
echo "test-install: the installed package works from C++, C$([ -n "$fc" ] && echo ' and Fortran')"
