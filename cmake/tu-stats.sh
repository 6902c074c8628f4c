#!/usr/bin/env bash
# Compiler launcher that records each translation unit's wall time and peak memory.
#   cmake --preset debug -B build/x -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/cmake/tu-stats.sh
#   SCIPROXY_TU_STATS=/tmp/tu.tsv cmake --build build/x    # default: ./tu-stats.tsv in the build
# Each line: wall seconds, CPU seconds (user + system), peak resident memory in MiB, exit status,
# the object file. CPU seconds are what a busy machine distorts least.
out="${SCIPROXY_TU_STATS:-$PWD/tu-stats.tsv}"
object="?"
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then object="$arg"; fi
  prev="$arg"
done
stats="$(mktemp)"
/usr/bin/time -f "%e %U %S %M" -o "$stats" "$@"
status=$?
read -r seconds user system kib < <(tail -n 1 "$stats") || true  # after any "exited with" line
rm -f "$stats"
cpu="$(awk -v u="${user:-0}" -v s="${system:-0}" 'BEGIN {printf "%.1f", u + s}')"
printf '%s\t%s\t%s\t%s\t%s\n' "$seconds" "$cpu" "$((${kib:-0} / 1024))" "$status" "$object" >>"$out"
exit "$status"
