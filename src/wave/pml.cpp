// C-PML profiles of the scalar propagator; equations in pml.hpp.
#include "pml.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels.hpp"
#include "math.hpp"

namespace sciproxy::wave::detail {

namespace {

constexpr double kReflection = 1e-3;  // R
constexpr int kPower = 2;             // n

}  // namespace

PmlProfiles make_pml_profiles(int ndim, int accuracy, const std::array<std::int64_t, kMaxDims>& n,
                              const std::array<std::int64_t, 2 * kMaxDims>& pml_width,
                              const std::array<double, kMaxDims>& spacing, double dt,
                              double max_vel, double pml_freq) {
  const std::int64_t h = accuracy / 2;
  PmlProfiles p;
  for (int d = 0; d < ndim; ++d) {
    const std::int64_t len = n[d];
    const std::int64_t width[2] = {pml_width[2 * d], pml_width[2 * d + 1]};
    // Coordinates (in cells) of the first model cell on each side: frac is 0 there.
    const double start[2] = {static_cast<double>(h + width[0]),
                             static_cast<double>(len - 1 - h - width[1])};
    auto& a = p.a[d];
    auto& b = p.b[d];
    a.assign(len, 0.0);
    b.assign(len, 0.0);
    for (std::int64_t x = 0; x < len; ++x) {
      double sigma = 0, frac = 0;
      for (int side = 0; side < 2; ++side) {
        if (width[side] == 0) continue;
        const double distance =
            side == 0 ? start[0] - static_cast<double>(x) : static_cast<double>(x) - start[1];
        const double f = std::clamp(distance / static_cast<double>(width[side]), 0.0, 1.0);
        const double sigma0 = -(1.0 + kPower) * max_vel * std::log(kReflection) /
                              (2.0 * static_cast<double>(width[side]) * spacing[d]);
        sigma += sigma0 * std::pow(f, kPower);
        frac = std::max(frac, f);
      }
      if (frac == 0) continue;  // not in a PML: a = b = 0
      const double alpha = std::numbers::pi * pml_freq * (1.0 - frac);
      const double total = (sigma + alpha) * dt;
      const double ratio = sigma + alpha > 0 ? std::clamp(sigma / (sigma + alpha), 0.0, 1.0) : 0.0;
      a[x] = std::exp(-total);
      b[x] = ratio *
             std::clamp(std::expm1(-total), -1.0, 0.0);  // = ratio (a - 1), without cancellation
    }
    auto& db = p.dbdx[d];
    db.assign(len, 0.0);
    // b' by the first-derivative stencil of the propagator's accuracy (math.hpp).
    with_value<kernels::Accuracies>(accuracy, "accuracy", [&](auto a) {
      for (std::int64_t x = h; x < len - h; ++x) {
        double sum = 0;
        for (std::int64_t k = 1; k <= h; ++k)
          sum += d1_coefficient<decltype(a)::value>(static_cast<int>(k)) * (b[x + k] - b[x - k]);
        db[x] = sum / spacing[d];
      }
    });
  }
  return p;
}

std::array<std::int64_t, 2 * kMaxDims> pml_interior(
    int ndim, int accuracy, const std::array<std::int64_t, kMaxDims>& n,
    const std::array<std::int64_t, 2 * kMaxDims>& pml_width) {
  const std::int64_t h = accuracy / 2;
  std::array<std::int64_t, 2 * kMaxDims> box = {0, 1, 0, 1, 0, 1};
  for (int d = 0; d < ndim; ++d) {
    const std::int64_t begin = std::min(pml_width[2 * d] + 3 * h, n[d] - h);
    const std::int64_t end = std::max(begin, n[d] - pml_width[2 * d + 1] - 3 * h);
    box[2 * d] = begin;
    box[2 * d + 1] = end;
  }
  return box;
}

}  // namespace sciproxy::wave::detail
