#!/usr/bin/env bash
# Builds the cuda preset here (nvcc is needed, a GPU is not) and packs what scripts/gpu-check.sh
# runs on a GPU machine that has the NVIDIA driver and CUDA toolkit but neither sciproxy's build
# dependencies nor a package archive to install them from:
#   tests/test_*_cuda   every gpu test executable (GoogleTest; the ctest label gpu)
#   apps/sciproxy       the command-line tool (bench, demo)
#   lib/                the shared libraries they load, other than glibc's and CUDA's
#                       (fftw, cfitsio, lapacke, openblas, netcdf, hdf5, MPI, OpenMP, ...)
#   MANIFEST            commit, date, CUDA architectures, nvcc version, file list
# About 40 MB with xz for sm_90 alone. On the GPU machine, in a checkout of the same commit:
#   scripts/gpu-check.sh --bundle gpu-bundle.tar.xz
#
#   scripts/gpu-bundle.sh [--arch LIST] [--out FILE] [--build-dir DIR]
#     --arch LIST      CUDA architectures, e.g. 90 (H100, H200) or "80;90" (default: the preset's)
#     --out FILE       the bundle (default: gpu-bundle.tar.xz)
#     --build-dir DIR  where the cuda preset is built (default: build/cuda)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

arch=""
out="gpu-bundle.tar.xz"
build="build/cuda"
while (($#)); do
  case "$1" in
    --arch) arch="${2:?--arch needs a list}"; shift ;;
    --out) out="${2:?--out needs a file}"; shift ;;
    --build-dir) build="${2:?--build-dir needs a folder}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -d /usr/local/cuda/bin ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null 2>&1 ||
  { echo "gpu-bundle: error: nvcc not found: the CUDA toolkit is needed to build the bundle" >&2; exit 2; }

configure=(cmake --preset cuda -B "$build")
[ -n "$arch" ] && configure+=("-DCMAKE_CUDA_ARCHITECTURES=$arch")
[ -x .venv/bin/python ] && configure+=("-DPython3_EXECUTABLE=$PWD/.venv/bin/python")
"${configure[@]}" >/dev/null
cmake --build "$build" --target sciproxy_cli gpu_tests

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/apps" "$stage/lib"
executables=("$build"/tests/test_*_cuda "$build/apps/sciproxy")
cp "$build"/tests/test_*_cuda "$stage/tests/"
cp "$build/apps/sciproxy" "$stage/apps/"
# The libraries the loader finds for them, less glibc's and the compiler's runtime (the GPU
# machine has its own, newer ones serve older programs, and a second glibc cannot be mixed in) and
# CUDA's (they come with the GPU machine's toolkit and driver).
ldd "${executables[@]}" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -v -E '/lib(cuda|cudart|cublas|cublasLt|cusolver|cusparse|nvJitLink|nvrtc|nvToolsExt|nvtx)[^/]*\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cuda_architectures $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "nvcc $(nvcc --version | tail -n 1)"
  echo "source_dir $root"
  (cd "$stage" && find tests apps lib -type f | sort)
} >"$stage/MANIFEST"
tmp="$out.tmp.$$"
tar -C "$stage" -cJf "$tmp" MANIFEST tests apps lib
mv "$tmp" "$out"
echo "gpu-bundle: wrote $out ($(du -h "$out" | cut -f1)): $(find "$stage/tests" -type f | wc -l) gpu test executables," \
  "sciproxy, $(find "$stage/lib" -type f | wc -l) libraries"
