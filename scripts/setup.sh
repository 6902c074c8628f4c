#!/usr/bin/env bash
# Installs what sciproxy needs and is missing: Debian packages (apt-get) and a Python virtual
# environment in .venv with the PyPI packages (numpy, pytest, hypothesis for the fuzz tests,
# matplotlib, the build tools, pyrocko for the side-by-side tests, astropy and fitsio to read the
# frames specex writes, netCDF4, xarray and icon-grid-generator for diffusion's grid files, mpi4py
# for the calls on several MPI ranks; Open MPI and METIS come from Debian; ccache, which lets the pip
# build reuse the cpu build's objects). Safe to run again: it only installs what is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(cmake ninja-build g++ gfortran pkg-config libgtest-dev libcli11-dev
                 nlohmann-json3-dev libfmt-dev libfftw3-dev libcfitsio-dev liblapacke-dev
                 libopenblas-dev libnetcdf-dev libopenmpi-dev openmpi-bin libmetis-dev
                 python3-dev python3-venv python3-pip ccache)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_packages=(numpy pytest hypothesis matplotlib nanobind scikit-build-core pyrocko astropy fitsio netCDF4 xarray
                 icon-grid-generator mpi4py)
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating the Python virtual environment .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import numpy, pytest, hypothesis, matplotlib, nanobind, scikit_build_core, pyrocko, astropy, fitsio, netCDF4, xarray, grid_generator, mpi4py" 2>/dev/null; then
  echo "setup: installing Python packages: ${python_packages[*]}"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "${python_packages[@]}"
fi
