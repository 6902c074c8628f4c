// Scalar wave propagator, CPU backend: how many time steps one sweep of the forward runs over the
// grid (temporal blocking, cpu_forward.hpp). The forward driver and the work model (api.cpp),
// which counts the bytes of that schedule, both ask here.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sciproxy/wave.hpp"

namespace sciproxy::wave::kernels::cpu {

// The planes that a 3-D sweep of `steps` steps keeps in cache: the leading step's 2h + 1 stencil
// planes, and h + 1 more for each further step, which trails the one before by h + 1 planes.
inline std::int64_t sweep_planes(std::int64_t h, std::int64_t steps) {
  return 2 * h + 1 + (steps - 1) * (h + 1);
}

// Bytes per cell of a plane that a sweep keeps: u^t, u^{t-1}, v^2 dt^2, and the C-PML fields
// (q twice and zeta, in the PML only: about one array's worth on average).
constexpr std::int64_t kSweepFieldsPerCell = 4;

// Steps per sweep: tuning.sweep_steps; in 3-D fewer, where the planes of `concurrent` shots at
// once (one per thread when the threads run shots alone) would exceed tuning.sweep_cache_bytes.
inline std::int64_t sweep_steps(int ndim, std::int64_t h, std::int64_t plane_cells,
                                std::int64_t elem, std::int64_t concurrent,
                                const ScalarCpuTuning& tuning) {
  std::int64_t steps = std::max<std::int64_t>(1, tuning.sweep_steps);
  if (ndim != 3) return steps;
  const double plane = double(plane_cells) * double(elem * kSweepFieldsPerCell) *
                       double(std::max<std::int64_t>(1, concurrent));
  while (steps > 1 && double(sweep_planes(h, steps)) * plane > double(tuning.sweep_cache_bytes))
    --steps;
  return steps;
}

}  // namespace sciproxy::wave::kernels::cpu
