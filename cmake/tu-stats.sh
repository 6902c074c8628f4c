#!/usr/bin/env bash
# Compiler launcher that records each translation unit's wall time and peak memory.
#   cmake --preset debug -B build/x -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/cmake/tu-stats.sh
#   SCIPROXY_TU_STATS=/tmp/tu.tsv cmake --build build/x    # default: ./tu-stats.tsv in the build
# Each line: seconds, peak resident memory in MiB, exit status, the object file.
out="${SCIPROXY_TU_STATS:-$PWD/tu-stats.tsv}"
object="?"
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then object="$arg"; fi
  prev="$arg"
done
stats="$(mktemp)"
/usr/bin/time -f "%e %M" -o "$stats" "$@"
status=$?
read -r seconds kib < <(tail -n 1 "$stats") || true  # after any "exited with" line
rm -f "$stats"
printf '%s\t%s\t%s\t%s\n' "$seconds" "$((${kib:-0} / 1024))" "$status" "$object" >>"$out"
exit "$status"
