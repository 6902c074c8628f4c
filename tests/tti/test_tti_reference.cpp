// Coupled P/M TTI propagator, reference backend: is it right?
//  - adjoint: <F s, d> = <s, F* d> in float64 for the map source amplitudes -> receiver
//    amplitudes, on a variable-density, tilted anisotropic model with sponge and free surface
//    (sources and receivers on the surface too), every space order;
//  - isotropic, constant density: P against the scalar propagator (a different discretisation:
//    central second differences) on a grid where no reflection arrives in time;
//  - energy: without sponge, attenuation and sources, the leapfrog energy
//    E^{t+1/2} = (u^{t+1} - u^t)^T S^-1 (u^{t+1} - u^t) - u^{t+1}^T L u^t  (S = dt^2 vp^2 / b,
//    L u^t = S^-1 (u^{t+1} - 2 u^t + u^{t-1})) is constant; with the sponge it decays;
//  - rotations by 90 degrees: the model with its symmetry axis along axis 2 (theta = 90, phi = 0)
//    or axis 1 (theta = phi = 90) gives the transposed wavefield of the one along axis 0;
//  - bad input.
// Tolerances are relative L2 norms ||a - b|| / ||b||, stated where they are used.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/tti.hpp"
#include "sciproxy/wave.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;
using sciproxy::wave::scalar;
using sciproxy::wave::ScalarInput;
using sciproxy::wave::ScalarOptions;

namespace {

const Device kReference{Backend::reference, 0, false};
using Shape3 = std::array<std::int64_t, 3>;

template <class T>
struct Problem {
  Grid grid{3, {1, 1, 1}, {10, 10, 10}};
  std::vector<T> vp, b, eps, delta, theta, phi, f;
  double dt = 0;
  std::int64_t nt = 0, nshots = 1, nsources = 0, nreceivers = 0;
  std::vector<T> amplitudes;
  std::vector<std::int64_t> sources, receivers;

  TtiInput<T> input() const {
    TtiInput<T> in;
    in.model.grid = grid;
    in.model.vp = vp;
    in.model.buoyancy = b;
    in.model.epsilon = eps;
    in.model.delta = delta;
    in.model.theta = theta;
    in.model.phi = phi;
    in.model.f = f;
    in.dt = dt;
    in.nt = nt;
    in.nshots = nshots;
    in.nsources = nsources;
    in.nreceivers = nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }
  std::int64_t cells() const { return grid.cells(); }
};

// Random heterogeneous, tilted, anisotropic model with variable density; valid eta everywhere.
Problem<double> random_problem(Shape3 shape, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Problem<double> p;
  p.grid.shape = shape;
  p.grid.spacing = {10, 12, 11};
  const std::int64_t n = p.cells();
  for (std::int64_t i = 0; i < n; ++i) {
    p.vp.push_back(1500 + 1000 * u(rng));
    p.b.push_back(0.4 + 0.6 * u(rng));
    const double e = 0.25 * u(rng);
    p.eps.push_back(e);
    p.delta.push_back(e - 0.2 * u(rng));  // delta <= eps, >= -0.2 > -f/2
    p.theta.push_back(std::numbers::pi * u(rng));
    p.phi.push_back(2 * std::numbers::pi * u(rng));
    p.f.push_back(0.6 + 0.35 * u(rng));
  }
  return p;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(n);
  for (double& v : x) v = normal(rng);
  return x;
}

template <class T>
double dot(const std::vector<T>& a, const std::vector<T>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

template <class T, class U>
double rel_l2(const std::vector<T>& a, const std::vector<U>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

double ricker(double t, double f0, double t0) {
  const double a = std::numbers::pi * f0 * (t - t0);
  return (1 - 2 * a * a) * std::exp(-a * a);
}

// ---------------------------------------------------------------------------------------------

struct AdjointCase {
  int order;
  bool free_surface;
};

class TtiAdjoint : public ::testing::TestWithParam<AdjointCase> {};

// <F s, d> = <s, F* d> to 1e-10 relative in float64 (rounding only; measured 6e-16 to 5e-15).
TEST_P(TtiAdjoint, DotProduct) {
  const AdjointCase c = GetParam();
  Problem<double> p = random_problem({13, 14, 15}, 7 + c.order);
  TtiOptions opt;
  opt.space_order = c.order;
  opt.sponge_width = {3, 4, 2, 3, 4, 2};
  opt.free_surface = c.free_surface;
  opt.q_min = 0.5;
  opt.freq_q = 20;  // strong damping so the sponge terms matter within the run
  p.nshots = 2;
  p.nsources = 2;
  p.nreceivers = 3;
  p.nt = 37;
  p.dt = 0.9 * tti_max_dt(p.input().model, opt);
  // A source and a receiver on the first row (the free surface when there is one).
  p.sources = {0, 5, 6, 7, 8, 9, 3, 3, 3, 12, 13, 14};
  p.receivers = {0, 1, 1, 6, 7, 8, 12, 13, 14, 2, 2, 2, 0, 13, 0, 9, 3, 11};
  p.amplitudes = random_vector(p.nshots * p.nsources * p.nt, 1);
  const auto data = random_vector(p.nshots * p.nreceivers * p.nt, 2);
  const auto forward = tti_forward<double>(kReference, p.input(), opt);
  const auto adjoint = tti_adjoint<double>(kReference, p.input(), data, opt);
  const double lhs = dot(forward.receiver_amplitudes, data);
  const double rhs = dot(p.amplitudes, adjoint.source_amplitudes);
  EXPECT_GT(std::abs(lhs), 0);
  RecordProperty("relative_error", fmt::format("{:.3g}", std::abs(lhs - rhs) / std::abs(lhs)));
  EXPECT_LE(std::abs(lhs - rhs), 1e-10 * std::abs(lhs)) << "lhs " << lhs << " rhs " << rhs;
}

INSTANTIATE_TEST_SUITE_P(Orders, TtiAdjoint,
                         ::testing::Values(AdjointCase{8, true}, AdjointCase{8, false},
                                           AdjointCase{4, true}, AdjointCase{12, true},
                                           AdjointCase{16, true}),
                         [](const auto& info) {
                           return "order" + std::to_string(info.param.order) +
                                  (info.param.free_surface ? "_free_surface" : "_sponge");
                         });

// With a free surface, P vanishes on the surface and the receivers there record zero.
TEST(TtiReference, FreeSurfaceHoldsZeroPressure) {
  Problem<double> p = random_problem({12, 12, 12}, 3);
  TtiOptions opt;
  opt.sponge_width = {0, 3, 3, 3, 3, 3};
  opt.free_surface = true;
  p.nsources = 1;
  p.nreceivers = 2;
  p.nt = 30;
  p.dt = 0.9 * tti_max_dt(p.input().model, opt);
  p.sources = {2, 6, 6};
  p.receivers = {0, 6, 6, 1, 6, 6};
  p.amplitudes = random_vector(p.nt, 3);
  const auto out = tti_forward<double>(kReference, p.input(), opt);
  const auto& r = out.receiver_amplitudes;
  double surface = 0, below = 0;
  for (std::int64_t t = 0; t < p.nt; ++t) {
    surface += std::abs(r[t]);
    below += std::abs(r[p.nt + t]);
  }
  EXPECT_EQ(surface, 0.0);
  EXPECT_GT(below, 0.0);
  const std::int64_t surface_row = out.state.model_offset[0];
  const auto& n = out.state.padded_shape;
  for (std::int64_t i = 0; i <= surface_row * n[1] * n[2] + n[1] * n[2] - 1; ++i)
    ASSERT_EQ(out.state.p[i], 0.0) << "at flat index " << i;
}

// Isotropic (eps = delta = 0), constant density: P obeys P_tt = vp^2 Laplacian P + vp^2 s, the
// equation of the scalar propagator (which injects -v^2 dt^2 f, hence the sign). A 3D grid of
// 44^3 cells of 5 m, a 25 Hz Ricker at the centre, receivers 5 to 8 cells away, 0.09 s: the
// first reflection from the edges (zero halo, no PML) reaches a receiver after 0.0925 s. The two
// schemes differ in their dispersion only (staggered D-D+ of order 8 vs central second differences
// of accuracy 8, 16 cells per wavelength at f0): measured 4.4e-5; bound 1e-3.
TEST(TtiReference, IsotropicMatchesScalarPropagator) {
  const std::int64_t n = 44, c = n / 2;
  Problem<double> p;
  p.grid.shape = {n, n, n};
  p.grid.spacing = {5, 5, 5};
  p.vp.assign(n * n * n, 2000.0);
  p.dt = 5e-4;
  p.nt = 180;
  p.nsources = 1;
  p.sources = {c, c, c};
  p.nreceivers = 4;
  p.receivers = {c + 5, c, c, c, c - 6, c, c, c, c + 7, c - 5, c + 5, c};
  for (std::int64_t t = 0; t < p.nt; ++t) p.amplitudes.push_back(ricker(t * p.dt, 25, 0.048));
  TtiOptions opt;
  opt.sponge_width = {0, 0, 0, 0, 0, 0};
  opt.freq_q = 0;
  const auto out = tti_forward<double>(kReference, p.input(), opt);

  ScalarInput<double> s;
  s.grid = p.grid;
  s.v = p.vp;
  s.dt = p.dt;
  s.nt = p.nt;
  s.nsources = 1;
  s.nreceivers = p.nreceivers;
  std::vector<double> negated;
  for (double a : p.amplitudes) negated.push_back(-a);
  s.source_amplitudes = negated;
  s.source_locations = p.sources;
  s.receiver_locations = p.receivers;
  ScalarOptions so;
  so.accuracy = 8;
  so.pml_width = {0, 0, 0, 0, 0, 0};
  const auto scalar_out = scalar<double>(Device{Backend::cpu, 0, false}, s, so);
  ASSERT_EQ(scalar_out.step_ratio, 1);
  const double error = rel_l2(out.receiver_amplitudes, scalar_out.receiver_amplitudes);
  RecordProperty("rel_l2_vs_scalar", fmt::format("{:.3g}", error));
  EXPECT_LT(error, 1e-3);
  // The M field travels at sqrt(1 - f) vp and does not reach P when eta = 0.
}

// ---------------------------------------------------------------------------------------------
// Energy

struct Energy {
  double value;
};

// E^{t+1/2} from u^{t-1}, u^t (state `before`) and u^{t+1} (state `after`, one step later), for
// a model without sponge: S^-1 = b / (dt^2 vp^2) at the model cell of each padded cell.
double energy(const Problem<double>& p, const TtiState<double>& before,
              const TtiState<double>& after) {
  const auto& n = before.padded_shape;
  const auto& o = before.model_offset;
  double e = 0;
  for (std::int64_t i0 = 0; i0 < p.grid.shape[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < p.grid.shape[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < p.grid.shape[2]; ++i2) {
        const std::int64_t cell = (i0 * p.grid.shape[1] + i1) * p.grid.shape[2] + i2;
        const std::int64_t k = ((i0 + o[0]) * n[1] + i1 + o[1]) * n[2] + i2 + o[2];
        const double s_inv = p.b[cell] / (p.dt * p.dt * p.vp[cell] * p.vp[cell]);
        for (int field = 0; field < 2; ++field) {
          const double prev = field ? before.m_prev[k] : before.p_prev[k];
          const double now = field ? before.m[k] : before.p[k];
          const double next = field ? after.m[k] : after.p[k];
          const double l_now = s_inv * (next - 2 * now + prev);
          e += s_inv * (next - now) * (next - now) - next * l_now;
        }
      }
  return e;
}

// A Gaussian bump in P and M at rest, in a tilted anisotropic variable-density model.
TtiState<double> bump(const Problem<double>& p, const TtiOptions& opt) {
  Problem<double> q = p;
  q.nt = 0;
  TtiState<double> st = tti_forward<double>(kReference, q.input(), opt).state;
  const auto& n = st.padded_shape;
  const auto& o = st.model_offset;
  for (std::int64_t i0 = 0; i0 < p.grid.shape[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < p.grid.shape[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < p.grid.shape[2]; ++i2) {
        const double r2 = std::pow(i0 - 0.5 * p.grid.shape[0], 2) +
                          std::pow(i1 - 0.5 * p.grid.shape[1], 2) +
                          std::pow(i2 - 0.5 * p.grid.shape[2], 2);
        const std::int64_t k = ((i0 + o[0]) * n[1] + i1 + o[1]) * n[2] + i2 + o[2];
        st.p[k] = st.p_prev[k] = std::exp(-r2 / 4);
        st.m[k] = st.m_prev[k] = 0.5 * std::exp(-r2 / 6);
      }
  return st;
}

// Runs `steps` steps from `from`.
TtiState<double> advance(Problem<double> p, const TtiOptions& opt, const TtiState<double>& from,
                         std::int64_t steps) {
  p.nt = steps;
  return tti_forward<double>(kReference, p.input(), opt, &from).state;
}

double energy_at(const Problem<double>& p, const TtiOptions& opt, const TtiState<double>& start,
                 std::int64_t t) {
  const TtiState<double> before = advance(p, opt, start, t);
  const TtiState<double> after = advance(p, opt, before, 1);
  return energy(p, before, after);
}

// Constant to 1e-9 relative over 400 steps in float64 (rounding only; measured 2e-15 and 5e-15),
// with and without a free surface.
TEST(TtiReference, EnergyIsConservedWithoutSponge) {
  for (bool free_surface : {false, true}) {
    Problem<double> p = random_problem({16, 17, 18}, 11);
    TtiOptions opt;
    opt.sponge_width = {0, 0, 0, 0, 0, 0};
    opt.freq_q = 0;
    opt.free_surface = free_surface;
    p.dt = 0.95 * tti_max_dt(p.input().model, opt);
    const TtiState<double> start = bump(p, opt);
    const double e1 = energy_at(p, opt, start, 1), e2 = energy_at(p, opt, start, 200),
                 e3 = energy_at(p, opt, start, 400);
    EXPECT_GT(e1, 0);
    RecordProperty(free_surface ? "drift_free_surface" : "drift",
                   fmt::format("{:.3g}", std::abs(e3 - e1) / e1));
    EXPECT_LE(std::abs(e2 - e1), 1e-9 * e1) << "free surface " << free_surface;
    EXPECT_LE(std::abs(e3 - e1), 1e-9 * e1)
        << "free surface " << free_surface << ": " << e1 << " -> " << e3;
  }
}

// With the sponge (8 cells per side, WaveFD's q_min and freq_q, no attenuation inside) the
// energy of the pulse decays as it leaves the model: below half after 200 steps and below a
// tenth after 600 (the pulse crosses the 18-cell model in about 100 steps); the energy is
// computed over the model cells, where there is no damping (measured 0.23 and 0.05).
TEST(TtiReference, EnergyDecaysInTheSponge) {
  Problem<double> p = random_problem({16, 17, 18}, 11);
  TtiOptions opt;
  opt.sponge_width = {8, 8, 8, 8, 8, 8};
  opt.q_interior = 1e12;
  p.dt = 0.9 * tti_max_dt(p.input().model, opt);
  const TtiState<double> start = bump(p, opt);
  const double e1 = energy_at(p, opt, start, 1), e2 = energy_at(p, opt, start, 200),
               e3 = energy_at(p, opt, start, 600);
  RecordProperty("ratios", fmt::format("{:.3g} {:.3g}", e2 / e1, e3 / e1));
  EXPECT_LT(e2, 0.5 * e1);
  EXPECT_LT(e3, 0.1 * e1) << e1 << " -> " << e2 << " -> " << e3;
}

// ---------------------------------------------------------------------------------------------
// Rotations

// The index of cell (i0, i1, i2) of a cube after swapping axes a and b.
Shape3 swapped(Shape3 i, int a, int b) {
  std::swap(i[a], i[b]);
  return i;
}

// The symmetry axis along axis 0 (theta = 0) against along axis 2 (theta = 90 deg, phi = 0) and
// along axis 1 (theta = phi = 90 deg), with the heterogeneous model, the source and the
// receivers transposed accordingly: the same wavefield, transposed. The discrete operator is
// invariant under axis permutations of a cube with equal spacing, so only cos(pi/2) = 6e-17
// differs: bound 1e-10 (measured 5e-16 and 7e-16).
TEST(TtiReference, RotationBy90DegreesTransposesTheWavefield) {
  const std::int64_t n = 14;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  Problem<double> base;
  base.grid.shape = {n, n, n};
  base.grid.spacing = {10, 10, 10};
  for (std::int64_t i = 0; i < n * n * n; ++i) {
    base.vp.push_back(1800 + 400 * u(rng));
    base.b.push_back(0.5 + 0.5 * u(rng));
    base.eps.push_back(0.2);
    base.delta.push_back(0.05);
    base.theta.push_back(0);
    base.phi.push_back(0);
  }
  base.nt = 60;
  base.nsources = 1;
  base.sources = {4, 6, 8};
  base.nreceivers = 3;
  base.receivers = {9, 3, 2, 5, 10, 7, 2, 2, 11};
  for (std::int64_t t = 0; t < base.nt; ++t) base.amplitudes.push_back(ricker(t * 1e-3, 40, 0.02));
  TtiOptions opt;
  opt.sponge_width = {4, 4, 4, 4, 4, 4};
  base.dt = 0.8 * tti_max_dt(base.input().model, opt);
  const auto reference = tti_forward<double>(kReference, base.input(), opt);
  const auto& pn = reference.state.padded_shape;

  struct Rotation {
    double theta, phi;
    int axis;  // the axis that takes the place of axis 0
  };
  for (const Rotation r : {Rotation{std::numbers::pi / 2, 0, 2},
                           Rotation{std::numbers::pi / 2, std::numbers::pi / 2, 1}}) {
    Problem<double> rot = base;
    auto flat = [&](const Shape3& i, const Shape3& shape) {
      return (i[0] * shape[1] + i[1]) * shape[2] + i[2];
    };
    for (std::int64_t i0 = 0; i0 < n; ++i0)
      for (std::int64_t i1 = 0; i1 < n; ++i1)
        for (std::int64_t i2 = 0; i2 < n; ++i2) {
          const std::int64_t from = flat({i0, i1, i2}, {n, n, n});
          const std::int64_t to = flat(swapped({i0, i1, i2}, 0, r.axis), {n, n, n});
          rot.vp[to] = base.vp[from];
          rot.b[to] = base.b[from];
          rot.theta[to] = r.theta;
          rot.phi[to] = r.phi;
        }
    auto move = [&](std::vector<std::int64_t>& loc) {
      for (std::size_t k = 0; k < loc.size(); k += 3) {
        const Shape3 x = swapped({loc[k], loc[k + 1], loc[k + 2]}, 0, r.axis);
        std::copy(x.begin(), x.end(), loc.begin() + k);
      }
    };
    move(rot.sources);
    move(rot.receivers);
    const auto out = tti_forward<double>(kReference, rot.input(), opt);
    RecordProperty(
        "axis" + std::to_string(r.axis),
        fmt::format("{:.3g}", rel_l2(out.receiver_amplitudes, reference.receiver_amplitudes)));
    EXPECT_LT(rel_l2(out.receiver_amplitudes, reference.receiver_amplitudes), 1e-10)
        << "axis " << r.axis;
    std::vector<double> back(out.state.p.size());
    for (std::int64_t i0 = 0; i0 < pn[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < pn[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < pn[2]; ++i2)
          back[flat({i0, i1, i2}, pn)] = out.state.p[flat(swapped({i0, i1, i2}, 0, r.axis), pn)];
    EXPECT_LT(rel_l2(back, reference.state.p), 1e-10) << "axis " << r.axis;
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TtiReference, BadInput) {
  Problem<double> good = random_problem({10, 10, 10}, 2);
  TtiOptions opt;
  opt.sponge_width = {2, 2, 2, 2, 2, 2};
  good.nsources = 1;
  good.sources = {5, 5, 5};
  good.nt = 4;
  good.amplitudes = {1, 0, 0, 0};
  good.dt = 0.5 * tti_max_dt(good.input().model, opt);
  auto run = [&](const Problem<double>& p, const TtiOptions& o) {
    return [p, o] { tti_forward<double>(kReference, p.input(), o); };
  };
  EXPECT_NO_THROW(run(good, opt)());

  Problem<double> p = good;
  p.grid.shape = {3, 10, 10};
  p.vp.resize(300);
  expect_invalid(run(p, opt), "vp: expected at least space_order/2 = 4 cells along axis 0");
  p = good;
  p.grid.spacing[1] = 0;
  expect_invalid(run(p, opt), "grid_spacing[1]");
  p = good;
  p.vp[17] = -1500;
  expect_invalid(run(p, opt), "vp");
  p = good;
  p.vp[3] = std::nan("");
  expect_invalid(run(p, opt), "vp");
  p = good;
  p.b[3] = 0;
  expect_invalid(run(p, opt), "buoyancy");
  p = good;
  p.eps[9] = std::nan("");
  expect_invalid(run(p, opt), "epsilon");
  p = good;
  p.theta[9] = std::nan("");
  expect_invalid(run(p, opt), "theta");
  p = good;
  p.delta[4] = p.eps[4] + 0.1;  // eta^2 < 0
  expect_invalid(run(p, opt), "eta^2");
  p = good;
  p.dt = 1.01 * tti_max_dt(good.input().model, opt);
  expect_invalid(run(p, opt), "stability limit");
  p = good;
  p.sources = {5, 10, 5};
  expect_invalid(run(p, opt), "source_locations");
  p = good;
  p.amplitudes = {1, 2, 3};
  expect_invalid(run(p, opt), "source_amplitudes");
  p = good;
  p.amplitudes[1] = std::nan("");
  expect_invalid(run(p, opt), "source_amplitudes");
  p = good;
  p.vp.pop_back();
  expect_invalid(run(p, opt), "vp");
  TtiOptions o = opt;
  o.space_order = 6;
  expect_invalid(run(good, o), "space_order");
  o = opt;
  o.q_min = 0;
  expect_invalid(run(good, o), "q_min");
  o = opt;
  o.freq_q = std::nan("");
  expect_invalid(run(good, o), "freq_q");
  o = opt;
  o.sponge_width[3] = -1;
  expect_invalid(run(good, o), "sponge_width[3]");
  p = good;
  p.grid.ndim = 2;
  expect_invalid(run(p, opt), "vp: expected a 3-D model");
  // The adjoint checks its data.
  const std::vector<double> wrong(3, 0.0);
  good.nreceivers = 1;
  good.receivers = {1, 1, 1};
  expect_invalid([&] { tti_adjoint<double>(kReference, good.input(), wrong, opt); },
                 "receiver_amplitudes");
}

}  // namespace
