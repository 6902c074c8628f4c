// Reference backend of the TTI workshop demo operator: the definition of correct. Plain serial
// loops over the spec's expressions (docs/kernels/tti.md, "The workshop operator"), evaluated in
// double precision from the raw materials (sin, cos and sqrt per point and step, as the
// workshop's generated code did); only u is stored in T. Per step:
//   F = b(1+2eps) [e1 (e1.g) + e2 (e2.g)] + n [b(1 - f eta^2)(n.g) + b f eta sqrt(1-eta^2)],
//       g = (D+x u, D+y u, D+z u), e1 = (cos th sin ph, cos th cos ph, -sin th),
//       e2 = (cos ph, -sin ph, 0), n = (sin th sin ph, sin th cos ph, cos th)
//   u+ = (2 - d) u + (d - 1) u- + dt^2 (vp^2 / b) (D-x Fx + D-y Fy + D-z Fz)
//   u+ += dt^2 (vp^2 / b) s(t) w_c at the 8 corners c around the source (trilinear weights w_c)
// The fluxes live on the grid only (zero in the halo), as u does.
#include <cmath>
#include <utility>
#include <vector>

#include "sciproxy/core/cancel.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::reference {

namespace {

using std::int64_t;

// D+ f at the point f points to, along stride s, accumulated in double.
template <int A, class T>
double forward_difference(const T* f, int64_t s, double rh) {
  double sum = 0;
  for (int k = 1; k <= A / 2; ++k)
    sum += staggered_coefficient<A>(k) *
           (static_cast<double>(f[k * s]) - static_cast<double>(f[(1 - k) * s]));
  return sum * rh;
}

// D- g at the point g points to, along stride s.
template <int A>
double backward_difference(const double* g, int64_t s, double rh) {
  double sum = 0;
  for (int k = 1; k <= A / 2; ++k)
    sum += staggered_coefficient<A>(k) * (g[(k - 1) * s] - g[-k * s]);
  return sum * rh;
}

template <int A, class T>
void run_order(const DemoGrid& g, const DemoRawMaterial<T>& mat, double dt,
               const DemoSource<T>& src, int64_t nt, DemoFields<T> fields, Timers* timers) {
  const int64_t sx = g.stride_x(), sy = g.stride_y();
  const double rhx = 1 / g.spacing[0], rhy = 1 / g.spacing[1], rhz = 1 / g.spacing[2];
  const double dt2 = dt * dt;
  std::vector<double> fx(g.padded_points(), 0.0), fy(g.padded_points(), 0.0),
      fz(g.padded_points(), 0.0);
  T* u = fields.u;
  T* u_prev = fields.u_prev;  // u^{t-1} on entry of a step, u^{t+1} after it

  for (int64_t t = 0; t < nt; ++t) {
    throw_if_cancelled("tti_demo (reference)", t, nt);
    {
      auto r = Timers::region(timers, "flux pass");
      for (int64_t i = 0; i < g.n[0]; ++i)
        for (int64_t j = 0; j < g.n[1]; ++j)
          for (int64_t k = 0; k < g.n[2]; ++k) {
            const int64_t p = (i * g.n[1] + j) * g.n[2] + k;  // material index
            const int64_t q = g.index(i, j, k);               // padded index
            const double gx = forward_difference<A>(u + q, sx, rhx);
            const double gy = forward_difference<A>(u + q, sy, rhy);
            const double gz = forward_difference<A>(u + q, 1, rhz);
            const double th = mat.theta.at(p), ph = mat.phi.at(p);
            const double b = mat.b.at(p), eps = mat.epsilon.at(p), eta = mat.eta.at(p),
                         f = mat.f.at(p);
            const double e1[3] = {std::cos(th) * std::sin(ph), std::cos(th) * std::cos(ph),
                                  -std::sin(th)};
            const double e2[3] = {std::cos(ph), -std::sin(ph), 0.0};
            const double n[3] = {std::sin(th) * std::sin(ph), std::sin(th) * std::cos(ph),
                                 std::cos(th)};
            const double e1g = e1[0] * gx + e1[1] * gy + e1[2] * gz;
            const double e2g = e2[0] * gx + e2[1] * gy + e2[2] * gz;
            const double ng = n[0] * gx + n[1] * gy + n[2] * gz;
            const double across = b * (1 + 2 * eps);
            const double along =
                b * (1 - f * eta * eta) * ng + b * f * eta * std::sqrt(1 - eta * eta);
            fx[q] = across * (e1[0] * e1g + e2[0] * e2g) + n[0] * along;
            fy[q] = across * (e1[1] * e1g + e2[1] * e2g) + n[1] * along;
            fz[q] = across * (e1[2] * e1g + e2[2] * e2g) + n[2] * along;
          }
    }
    {
      auto r = Timers::region(timers, "divergence pass");
      for (int64_t i = 0; i < g.n[0]; ++i)
        for (int64_t j = 0; j < g.n[1]; ++j)
          for (int64_t k = 0; k < g.n[2]; ++k) {
            const int64_t p = (i * g.n[1] + j) * g.n[2] + k;
            const int64_t q = g.index(i, j, k);
            const double div = backward_difference<A>(fx.data() + q, sx, rhx) +
                               backward_difference<A>(fy.data() + q, sy, rhy) +
                               backward_difference<A>(fz.data() + q, 1, rhz);
            const double d = mat.damping.at(p), vp = mat.vp.at(p), b = mat.b.at(p);
            u_prev[q] =
                static_cast<T>((2 - d) * static_cast<double>(u[q]) +
                               (d - 1) * static_cast<double>(u_prev[q]) + dt2 * vp * vp / b * div);
          }
    }
    {
      auto r = Timers::region(timers, "source injection");
      for (int c = 0; c < 8; ++c) {
        const auto& pt = src.points[c];
        const int64_t p = (pt[0] * g.n[1] + pt[1]) * g.n[2] + pt[2];
        const double vp = mat.vp.at(p), b = mat.b.at(p);
        u_prev[src.cells[c]] = static_cast<T>(static_cast<double>(u_prev[src.cells[c]]) +
                                              dt2 * vp * vp / b * src.weights[c] *
                                                  static_cast<double>(src.amplitudes[t]));
      }
    }
    std::swap(u, u_prev);
  }
  // After an odd number of steps the newest field sits in the caller's u_prev buffer.
  if (u != fields.u) {
    std::swap_ranges(fields.u, fields.u + g.padded_points(), fields.u_prev);
  }
}

}  // namespace

template <class T>
SCIPROXY_TTI_DEMO_FORWARD(T) {
  with_value<SpaceOrders>(p.grid.order, "space_order", [&](auto a) {
    run_order<a.value>(p.grid, p.raw, p.dt, p.source, p.nt, fields, ctx.timers);
  });
}

template SCIPROXY_TTI_DEMO_FORWARD(float);
template SCIPROXY_TTI_DEMO_FORWARD(double);

}  // namespace sciproxy::tti::kernels::reference
