// seismic: what the wave and tti families share: the model grid and the source/receiver
// location conventions (Deepwave's). See docs/kernels/scalar-wave.md and docs/kernels/tti.md.
//
// Arrays are row-major (C order), the last dimension contiguous; locations are cell indices
// [shot, source or receiver, dim] into the model (not the padded grid), or kIgnoreLocation.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace sciproxy::seismic {

constexpr int kMaxDims = 3;

// A source or receiver whose coordinates are all this value is ignored: it injects nothing and
// records zeros (Deepwave's IGNORE_LOCATION), so shots may have different numbers of each.
constexpr std::int64_t kIgnoreLocation = -(std::int64_t(1) << 31);

// Grid of the model: ndim dimensions, the first ndim entries of shape and spacing are used.
struct Grid {
  int ndim = 2;
  std::array<std::int64_t, kMaxDims> shape = {1, 1, 1};
  std::array<double, kMaxDims> spacing = {1, 1, 1};  // metres

  std::int64_t cells() const;
};

// Ricker wavelet of peak frequency f0 delayed by t0 (Devito's RickerSource: t0 = 1 / f0 when
// t0 <= 0): (1 - 2 a^2) exp(-a^2), a = pi f0 (t - t0), at t = 0, dt, ..., (nt - 1) dt.
// float and double (src/seismic/wavelets.cpp).
template <class T>
std::vector<T> ricker_wavelet(double f0, double dt, std::int64_t nt, double t0 = 0);

}  // namespace sciproxy::seismic
