#!/usr/bin/env bash
# A sciproxy command under mpiexec: it must succeed, and rank 0 alone must print, once, the
# report of the run on every rank (one "Operator" line, the "Ranks: N" line) with its
# verification passed; with 1 rank there is no ranks' section.
#   cli_on_ranks.sh RANKS MPIEXEC [launcher flags...] -- sciproxy ARGS...
set -uo pipefail
ranks=$1
shift
launcher=()
while [ "$1" != "--" ]; do
  launcher+=("$1")
  shift
done
shift
output=$("${launcher[@]}" -n "$ranks" "$@" 2>&1)
status=$?
fail() {
  printf '%s\n' "$output"
  echo "cli_on_ranks: FAILED: $*"
  exit 1
}
[ $status -eq 0 ] || fail "exit status $status"
operators=$(grep -c "^Operator " <<<"$output")
[ "$operators" -eq 1 ] || fail "$operators reports (expected one, from rank 0)"
if [ "$ranks" -gt 1 ]; then
  grep -q "^Ranks: $ranks on 1 node; exchanged " <<<"$output" || fail "no \"Ranks: $ranks\" line"
  grep -q "total max (rank)" <<<"$output" || fail "no multi-rank timer table"
else
  ! grep -q "^Ranks: " <<<"$output" || fail "a ranks' section on one rank"
fi
grep -qE "PASS" <<<"$output" || fail "no passed verification"
! grep -q "FAIL" <<<"$output" || fail "a failed verification"
echo "cli_on_ranks: $ranks ranks: one report, verified: $*"
