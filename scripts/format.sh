#!/usr/bin/env bash
# Formats the C, C++ and CUDA sources with clang-format and the checked-in .clang-format.
#   scripts/format.sh                 format every tracked source in place
#   scripts/format.sh --check         change nothing; list the files that need formatting, exit 1 if any
#   scripts/format.sh [--check] PATH  only the tracked sources under PATH (files or folders)
# CLANG_FORMAT names the binary (default: clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format: error: $clang_format not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- "$@" | grep -E '\.(c|h|cc|cpp|hpp|cu|cuh)$' || true)
if ((${#files[@]} == 0)); then
  echo "format: no C, C++ or CUDA sources tracked under ${*:-.}"
  exit 0
fi
if ((check)); then
  unformatted=()
  for f in "${files[@]}"; do
    if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
  done
  if ((${#unformatted[@]})); then
    printf '%s\n' "${unformatted[@]}"
    echo "format: ${#unformatted[@]} of ${#files[@]} files need formatting (scripts/format.sh formats them)" >&2
    exit 1
  fi
  echo "format: all ${#files[@]} files follow .clang-format"
else
  "$clang_format" -i "${files[@]}"
  echo "format: formatted ${#files[@]} files"
fi
