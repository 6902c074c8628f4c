// Coupled P/M TTI propagator, reference backend: the definition of correct. Plain loops, one
// shot at a time, arithmetic in double, the material tensor written out as 3x3 blocks
// (Bube et al. 2016; WaveFD.jl prop3DAcoTTIDenQ_DEO2_FDTD):
//   [FP]   [ e I + a n n^T    c n n^T       ] [gP]      gP = D+ P,  gM = D+ M  (staggered)
//   [FM] = [ c n n^T          g I + mm n n^T] [gM]
//   P' = (2 - d) P + (d - 1) P_prev + scale D- . FP,   M' likewise,   P'[src] += scale_s s
// with fluxes only on the box J and, for a free surface, the odd / even mirrors of
// kernels.hpp. Derivatives come from the coefficients of math.hpp, summed here in double.
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "sciproxy/core/cancel.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::reference {

namespace {

std::vector<double> coefficients(int order) {
  return with_value<SpaceOrders>(order, "space_order", [](auto a) {
    std::vector<double> c;
    for (int k = 1; k <= a.value / 2; ++k) c.push_back(tti::staggered_coefficient<a.value>(k));
    return c;
  });
}

using Index = std::array<std::int64_t, 3>;

template <class F>
void for_box(const Index& lo, const Index& hi, F&& f) {
  for (std::int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
    for (std::int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
      for (std::int64_t i2 = lo[2]; i2 < hi[2]; ++i2) f(Index{i0, i1, i2});
}

}  // namespace

template <class T>
SCIPROXY_TTI_FORWARD(T) {
  (void)ctx;  // nothing to time per region: the api times the whole call
  const std::vector<double> c = coefficients(p.order);
  const std::int64_t radius = p.order / 2, halo = p.halo(), points = p.points();
  const Index stride = {p.n[1] * p.n[2], p.n[2], 1};
  auto flat = [&](const Index& i) { return i[0] * stride[0] + i[1] * stride[1] + i[2]; };
  const std::int64_t surface = halo;  // row of axis 0 (free surface only)

  Index j_lo, j_hi, u_lo, u_hi;
  for (int a = 0; a < 3; ++a) {
    j_lo[a] = halo - 1;
    u_lo[a] = halo;
    j_hi[a] = u_hi[a] = p.n[a] - halo;
  }
  if (p.free_surface) {
    j_lo[0] = surface;
    u_lo[0] = surface + 1;
  }

  // Staggered derivatives along axis a of a field f (T or double) at cell k.
  auto d_plus = [&](const auto* f, std::int64_t k, int a) {
    double sum = 0;
    for (std::int64_t m = 1; m <= radius; ++m)
      sum += c[m - 1] * (double(f[k + m * stride[a]]) - double(f[k + (1 - m) * stride[a]]));
    return sum * double(p.rh[a]);
  };
  auto d_minus = [&](const auto* f, std::int64_t k, int a) {
    double sum = 0;
    for (std::int64_t m = 1; m <= radius; ++m)
      sum += c[m - 1] * (double(f[k + (m - 1) * stride[a]]) - double(f[k - m * stride[a]]));
    return sum * double(p.rh[a]);
  };
  // Rows 0 .. H-1 of axis 0 of f set to sign * f mirrored about `centre` (twice the centre).
  auto mirror = [&](auto* f, std::int64_t twice_centre, double sign) {
    for (std::int64_t r = 0; r < surface; ++r)
      for (std::int64_t i1 = 0; i1 < p.n[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < p.n[2]; ++i2)
          f[flat({r, i1, i2})] = static_cast<std::remove_reference_t<decltype(f[0])>>(
              sign * double(f[flat({twice_centre - r, i1, i2})]));
  };
  auto clear_mirror = [&](auto* f) {
    for (std::int64_t r = 0; r < surface; ++r)
      for (std::int64_t i = 0; i < stride[0]; ++i) f[r * stride[0] + i] = 0;
  };

  std::array<std::vector<double>, 3> fp, fm;
  for (int a = 0; a < 3; ++a) {
    fp[a].assign(static_cast<std::size_t>(points), 0.0);
    fm[a].assign(static_cast<std::size_t>(points), 0.0);
  }
  const TtiCoefficients<T>& co = p.coef;

  for (std::int64_t shot = 0; shot < p.nshots; ++shot) {
    T* P = fields.p + shot * points;
    T* P_prev = fields.p_prev + shot * points;
    T* M = fields.m + shot * points;
    T* M_prev = fields.m_prev + shot * points;
    for (std::int64_t t = 0; t < p.nt; ++t) {
      throw_if_cancelled("tti (reference)", shot * p.nt + t, p.nshots * p.nt);
      for (std::int64_t r = 0; r < p.nreceivers; ++r) {
        const std::int64_t k = p.receiver_cells[shot * p.nreceivers + r];
        double value = P[k];
        if (p.record_m) value += M[k];
        receivers[(t * p.nshots + shot) * p.nreceivers + r] = static_cast<T>(value);
      }
      if (p.free_surface) {  // P odd about the surface row
        mirror(P, 2 * surface, -1.0);
        mirror(M, 2 * surface, -1.0);
      }
      for_box(j_lo, j_hi, [&](const Index& i) {
        const std::int64_t k = flat(i);
        std::array<double, 3> gp, gm, n;
        double n_gp = 0, n_gm = 0;
        for (int a = 0; a < 3; ++a) {
          gp[a] = d_plus(P, k, a);
          gm[a] = d_plus(M, k, a);
          n[a] = co.n[a][k];
          n_gp += n[a] * gp[a];
          n_gm += n[a] * gm[a];
        }
        for (int a = 0; a < 3; ++a) {
          fp[a][k] =
              double(co.e[k]) * gp[a] + n[a] * (double(co.a[k]) * n_gp + double(co.c[k]) * n_gm);
          fm[a][k] =
              double(co.g[k]) * gm[a] + n[a] * (double(co.c[k]) * n_gp + double(co.mm[k]) * n_gm);
        }
      });
      if (p.free_surface) {  // axis-0 fluxes even about the surface row - 1/2
        mirror(fp[0].data(), 2 * surface - 1, 1.0);
        mirror(fm[0].data(), 2 * surface - 1, 1.0);
      }
      for_box(u_lo, u_hi, [&](const Index& i) {
        const std::int64_t k = flat(i);
        double div_p = 0, div_m = 0;
        for (int a = 0; a < 3; ++a) {
          div_p += d_minus(fp[a].data(), k, a);
          div_m += d_minus(fm[a].data(), k, a);
        }
        const double d = co.damping[k], s = co.scale[k];
        P_prev[k] = static_cast<T>((2 - d) * P[k] + (d - 1) * P_prev[k] + s * div_p);
        M_prev[k] = static_cast<T>((2 - d) * M[k] + (d - 1) * M_prev[k] + s * div_m);
      });
      std::swap(P, P_prev);
      std::swap(M, M_prev);
      for (std::int64_t q = 0; q < p.nsources; ++q) {
        const std::int64_t at = shot * p.nsources + q;
        const double amount = double(p.source_scale[at]) * sources[t * p.nshots * p.nsources + at];
        const std::int64_t k = p.source_cells[at];
        P[k] = static_cast<T>(P[k] + amount);
        if (p.inject_m) M[k] = static_cast<T>(M[k] + amount);
      }
    }
    if (p.free_surface) {
      clear_mirror(P);
      clear_mirror(M);
      clear_mirror(P_prev);
      clear_mirror(M_prev);
    }
    // An odd number of steps leaves the newest fields in the *_prev arrays.
    if (p.nt % 2 == 1) {
      std::swap_ranges(P, P + points, P_prev);
      std::swap_ranges(M, M + points, M_prev);
    }
  }
}

template SCIPROXY_TTI_FORWARD(float);
template SCIPROXY_TTI_FORWARD(double);

}  // namespace sciproxy::tti::kernels::reference
