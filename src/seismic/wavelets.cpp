// Source wavelets shared by the wave and tti families (declared in include/sciproxy/seismic.hpp).
// Ricker: (1 - 2 a^2) exp(-a^2), a = pi f0 (t - t0), the second derivative of a Gaussian, with
// Devito's RickerSource delay t0 = 1 / f0 by default (docs/kernels/tti.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/seismic.hpp"

namespace sciproxy::seismic {

template <class T>
std::vector<T> ricker_wavelet(double f0, double dt, std::int64_t nt, double t0) {
  if (!(f0 > 0) || !std::isfinite(f0))
    throw_invalid_argument("f0", "a positive peak frequency in Hz", fmt::format("{}", f0));
  if (t0 <= 0) t0 = 1 / f0;
  std::vector<T> w(static_cast<std::size_t>(std::max<std::int64_t>(nt, 0)));
  for (std::int64_t t = 0; t < nt; ++t) {
    const double a = std::numbers::pi * f0 * (static_cast<double>(t) * dt - t0);
    w[t] = static_cast<T>((1 - 2 * a * a) * std::exp(-a * a));
  }
  return w;
}

template std::vector<float> ricker_wavelet<float>(double, double, std::int64_t, double);
template std::vector<double> ricker_wavelet<double>(double, double, std::int64_t, double);

}  // namespace sciproxy::seismic
