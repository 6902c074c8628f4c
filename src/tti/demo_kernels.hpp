// The backend interface of the TTI workshop demo operator (include/sciproxy/tti_demo.hpp):
// declared once, implemented by demo_reference.cpp, demo_cpu.cpp and demo_cuda.cu
// (demo_cuda_hooks.cpp when CUDA is not built). demo.cpp checks the arguments, pads the fields,
// precomputes the per-point coefficients and hands every backend the same problem.
//
// Padded grid: the NX x NY x NZ grid with a halo of M = A/2 points on every side, where u and
// the fluxes stay zero (so the stencils need no bounds checks). Flat index of grid point
// (i, j, k) = ((i + M) * np[1] + (j + M)) * np[2] + (k + M), np = n + 2M, except along z where
// np[2] = nz_vector + 2M: the rows carry nz_vector - nz more zero points (nz rounded up to
// kVectorLength), so that SIMD loops may run over whole vectors without remainder loops. The
// coefficients are zero there too, so a backend that computes there gets fluxes 0 and u+ = 0.
//
// The reference evaluates the spec's expressions from the raw materials in double precision.
// cpu and cuda use coefficients computed once (demo.cpp), since e1 e1^T + e2 e2^T = I - n n^T:
//   F = a g + (bma (n.g) + s) n,   a = b(1+2eps), bma = b(1 - f eta^2) - a, s = b f eta sqrt(1-eta^2)
//   u+ = (2 - d) u + (d - 1) u- + m (D- . F),   m = dt^2 vp^2 / b
#pragma once

#include <array>
#include <cstdint>

#include "sciproxy/core/timers.hpp"
#include "sciproxy/tti_demo.hpp"

namespace sciproxy::tti::demo {

struct Grid {
  int order = 8;  // space order A
  int halo = 4;   // M = A / 2
  std::array<std::int64_t, 3> n = {0, 0, 0};   // grid points
  std::array<std::int64_t, 3> np = {0, 0, 0};  // padded: n + 2 M
  std::array<double, 3> spacing = {1, 1, 1};
  static constexpr std::int64_t kVectorLength = 16;
  std::int64_t nz_vector = 0;  // n[2] rounded up to kVectorLength
  std::int64_t stride_x() const { return np[1] * np[2]; }
  std::int64_t stride_y() const { return np[2]; }
  std::int64_t padded_points() const { return np[0] * np[1] * np[2]; }
  std::int64_t interior_points() const { return n[0] * n[1] * n[2]; }
  std::int64_t index(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return ((i + halo) * np[1] + (j + halo)) * np[2] + (k + halo);
  }
};

// Raw materials on the grid (not padded): value of point p = data[constant ? 0 : p], p the flat
// index (i * n[1] + j) * n[2] + k.
template <class T>
struct Field {
  const T* data = nullptr;
  bool constant = true;
  T at(std::int64_t p) const { return data[constant ? 0 : p]; }
};

template <class T>
struct RawMaterial {
  Field<T> vp, b, epsilon, eta, f, theta, phi, damping;
};

// Per-point coefficients on the padded grid (zero in the halo).
template <class T>
struct Coefficients {
  const T *nx = nullptr, *ny = nullptr, *nz = nullptr;  // the symmetry axis n
  const T *a = nullptr, *bma = nullptr, *s = nullptr;   // see the header comment
  const T* m = nullptr;                                 // dt^2 vp^2 / b
  const T* d = nullptr;                                 // damping
};

// The source: the 8 padded cells around its position and their trilinear weights (sum 1).
// The host backends scale by dt^2 vp^2 / b at each corner themselves (reference: from the raw
// materials in double; cpu: m), cuda gets `scaled` = weight * m from demo.cpp.
template <class T>
struct Source {
  std::array<std::int64_t, 8> cells{};
  std::array<std::array<std::int64_t, 3>, 8> points{};  // grid coordinates of each corner
  std::array<double, 8> weights{};
  std::array<T, 8> scaled{};   // weights[c] * m[cells[c]] in T
  const T* amplitudes = nullptr;  // [nt]
};

// u: in u^0, out u^nt; u_prev: in u^{-1}, out u^{nt-1}; both padded.
template <class T>
struct Fields {
  T* u = nullptr;
  T* u_prev = nullptr;
};

namespace reference {
// dt: the time step. Timers (host clock): "flux pass", "divergence pass", "source injection".
template <class T>
void run(const Grid& g, const RawMaterial<T>& mat, double dt, const Source<T>& src, std::int64_t nt,
         Fields<T> fields, Timers* timers);
}  // namespace reference

namespace cpu {
template <class T>
void run(const Grid& g, const Coefficients<T>& c, const Source<T>& src, std::int64_t nt,
         Fields<T> fields, TtiDemoForm form, Timers* timers);
}  // namespace cpu

namespace cuda {
// Host arrays in and out. Regions "upload", "flux pass", "divergence pass" (or "fused flux +
// divergence"), "source injection", "download", measured with CUDA events.
template <class T>
void run(const Grid& g, const Coefficients<T>& c, const Source<T>& src, std::int64_t nt,
         Fields<T> fields, TtiDemoForm form, int device_index, Timers* timers);
}  // namespace cuda

}  // namespace sciproxy::tti::demo
