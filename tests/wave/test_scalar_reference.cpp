// Scalar propagator, reference backend: is it right?
//  - adjoint: <F x, y> = <x, F* y> for the linear map (initial state, source amplitudes) ->
//    (final state, receiver amplitudes) in float64, over dimensions, accuracies, resampling, PML
//    layouts, per-shot models and survey windows; the resampling maps alone likewise;
//  - gradient with respect to v against central finite differences;
//  - direct waves in a homogeneous medium against analytic Green's functions (1D, 2D, 3D);
//  - PML: the energy left after a pulse has left the model;
//  - Deepwave v0.1 on small problems (tests/data/deepwave_scalar_reference.json, written by
//    tests/data/make_deepwave_reference.py).
// Storage modes, CFL, work model, timers and bad input: test_scalar_semantics.cpp.
// Every tolerance is stated where it is used; relative errors are ||a - b|| / ||b|| (L2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "scalar_reference_problems.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/wave.hpp"
#include "wave/resample.hpp"
#include "wave_locations.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace sciproxy::wave::test_reference;

namespace {

// ---------------------------------------------------------------------------------------------
// Adjoint (dot-product) tests

struct DotCase {
  const char* name;
  int ndim;
  std::array<std::int64_t, 3> shape;
  int accuracy;
  Array pml;
  std::int64_t nt;
  double dt_over_cfl = 0.9;  // > 1: resampling
  std::int64_t nshots = 2, nmodels = 1, nsources = 2, nreceivers = 3;
  Array survey_pad = {-1, -1, -1, -1, -1, -1};
  double freq_taper_frac = 0, time_pad_frac = 0;
  bool time_taper = false;
  std::array<std::int64_t, 3> lo = {0, 0, 0}, hi = {0, 0, 0};  // where sources and receivers go
};

void PrintTo(const DotCase& c, std::ostream* os) {
  *os << c.name;
}

class ScalarAdjoint : public testing::TestWithParam<DotCase> {};

TEST_P(ScalarAdjoint, DotProductFloat64) {
  const DotCase& c = GetParam();
  const auto p = random_problem(c.ndim, c.shape, c.nshots, c.nsources, c.nreceivers, c.nt,
                                c.dt_over_cfl, 11, c.nmodels, c.lo, c.hi);
  ScalarOptions opt;
  opt.accuracy = c.accuracy;
  opt.pml_width = c.pml;
  opt.survey_pad = c.survey_pad;
  opt.freq_taper_frac = c.freq_taper_frac;
  opt.time_pad_frac = c.time_pad_frac;
  opt.time_taper = c.time_taper;
  const ScalarState<double> x_state = random_state(p, opt, 21);
  const ScalarOutput<double> fx = scalar(kReference, p.input(), opt, &x_state);
  if (c.dt_over_cfl > 1) {
    EXPECT_GT(fx.step_ratio, 1);
  }
  const ScalarState<double> y_state = random_state(p, opt, 31);
  const auto y_receivers = random_vector(fx.receiver_amplitudes.size(), 41);
  const ScalarGradient<double> g = scalar_gradient(
      kReference, p.input(), opt, std::span<const double>(y_receivers), &x_state, &y_state);
  EXPECT_EQ(g.forward.receiver_amplitudes, fx.receiver_amplitudes);  // same forward pass
  const double lhs = dot(fx.state, y_state, c.ndim) + dot(fx.receiver_amplitudes, y_receivers);
  const double rhs = dot(x_state, g.initial_state, c.ndim) + dot(p.amplitudes, g.source_amplitudes);
  // float64 round-off over a few hundred operations per value: 1e-10 is a wide margin (~1e-14
  // seen).
  std::printf("%s: |<Fx,y> - <x,F*y>| / |<Fx,y>| = %.2g\n", c.name,
              std::abs(lhs - rhs) / std::abs(lhs));
  EXPECT_LE(std::abs(lhs - rhs), 1e-10 * std::abs(lhs)) << "lhs " << lhs << " rhs " << rhs;
  // The sources alone (zero initial state), so that their part is not hidden by the state's.
  const ScalarOutput<double> fs = scalar(kReference, p.input(), opt);
  const ScalarGradient<double> gs =
      scalar_gradient(kReference, p.input(), opt, std::span<const double>(y_receivers));
  const double lhs_s = dot(fs.receiver_amplitudes, y_receivers),
               rhs_s = dot(p.amplitudes, gs.source_amplitudes);
  if (c.nsources > 0 && c.nt > 0) {
    EXPECT_LE(std::abs(lhs_s - rhs_s), 1e-10 * std::abs(lhs_s))
        << "lhs " << lhs_s << " rhs " << rhs_s;
  }
}

const Array kPml = {3, 4, 2, 5, 4, 3};
INSTANTIATE_TEST_SUITE_P(
    Cases, ScalarAdjoint,
    testing::Values(DotCase{"d1_acc2", 1, {30, 1, 1}, 2, kPml, 13},
                    DotCase{"d1_acc4", 1, {30, 1, 1}, 4, kPml, 13},
                    DotCase{"d1_acc6", 1, {30, 1, 1}, 6, kPml, 13},
                    DotCase{"d1_acc8", 1, {30, 1, 1}, 8, kPml, 13},
                    DotCase{"d2_acc2", 2, {12, 10, 1}, 2, kPml, 11},
                    DotCase{"d2_acc4", 2, {12, 10, 1}, 4, kPml, 11},
                    DotCase{"d2_acc6", 2, {12, 10, 1}, 6, kPml, 11},
                    DotCase{"d2_acc8", 2, {12, 10, 1}, 8, kPml, 11},
                    DotCase{"d3_acc2", 3, {6, 7, 5}, 2, kPml, 9},
                    DotCase{"d3_acc4", 3, {6, 7, 5}, 4, kPml, 9},
                    DotCase{"d3_acc6", 3, {6, 7, 5}, 6, kPml, 7},
                    DotCase{"d3_acc8", 3, {6, 7, 5}, 8, kPml, 7},
                    // resampling: step_ratio 3 with every option of the FFT resampler, odd nt
                    DotCase{"d2_resample_tapers",
                            2,
                            {12, 10, 1},
                            4,
                            kPml,
                            9,
                            2.5,
                            2,
                            1,
                            2,
                            3,
                            {-1, -1, -1, -1, -1, -1},
                            0.2,
                            0.25,
                            true},
                    DotCase{"d1_resample_plain", 1, {30, 1, 1}, 8, kPml, 8, 4.3},
                    DotCase{"d2_no_pml", 2, {12, 10, 1}, 4, {0, 0, 0, 0, 0, 0}, 15},
                    DotCase{"d3_per_side_pml", 3, {6, 7, 5}, 4, {0, 3, 2, 0, 1, 4}, 9},
                    DotCase{"d2_model_per_shot", 2, {12, 10, 1}, 6, kPml, 11, 0.9, 3, 3, 1, 2},
                    DotCase{"d2_survey_window",
                            2,
                            {16, 14, 1},
                            4,
                            kPml,
                            11,
                            0.9,
                            2,
                            1,
                            2,
                            2,
                            {1, -1, 0, 2, 0, 0},
                            0,
                            0,
                            false,
                            {4, 3, 0},
                            {11, 10, 1}},
                    DotCase{"d3_window_per_shot_resample",
                            3,
                            {9, 8, 7},
                            2,
                            {2, 1, 0, 2, 1, 1},
                            7,
                            1.7,
                            2,
                            2,
                            1,
                            2,
                            {0, 1, -1, 0, 2, 1},
                            0.1,
                            0,
                            false,
                            {3, 2, 2},
                            {7, 6, 5}},
                    DotCase{"d2_one_step", 2, {12, 10, 1}, 8, kPml, 1},
                    DotCase{"d2_no_steps", 2, {12, 10, 1}, 8, kPml, 0}),
    [](const testing::TestParamInfo<DotCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Resampling: adjoints, identity, and Deepwave's output

struct ResampleCase {
  std::int64_t nt, ratio;
  double freq_taper_frac, time_pad_frac;
  bool time_taper;
};

TEST(ScalarResample, AdjointsByDotProduct) {
  for (const ResampleCase& c :
       {ResampleCase{16, 3, 0, 0, false}, ResampleCase{17, 2, 0.25, 0.3, true},
        ResampleCase{9, 5, 0.1, 0, true}, ResampleCase{12, 4, 0, 0.5, false},
        ResampleCase{1, 3, 0, 0, false}, ResampleCase{2, 7, 1.0, 1.0, true}}) {
    const detail::Resampling r{c.ratio, c.freq_taper_frac, c.time_pad_frac, c.time_taper};
    const std::int64_t ntr = 3, n = c.nt, m = c.nt * c.ratio;
    const auto x = random_vector(static_cast<std::size_t>(ntr * n), 1),
               y = random_vector(static_cast<std::size_t>(ntr * m), 2);
    std::vector<double> ux(y.size()), uty(x.size()), dy(x.size()), dtx(y.size());
    detail::upsample(x.data(), ntr, n, r, ux.data());
    detail::upsample_adjoint(y.data(), ntr, n, r, uty.data());
    detail::downsample(y.data(), ntr, n, r, dy.data());
    detail::downsample_adjoint(x.data(), ntr, n, r, dtx.data());
    // double-precision FFTs of a few dozen samples: 1e-12 relative.
    EXPECT_NEAR(dot(ux, y), dot(x, uty), 1e-12 * std::abs(dot(ux, y)) + 1e-14)
        << "upsample nt " << c.nt;
    EXPECT_NEAR(dot(dy, x), dot(y, dtx), 1e-12 * std::abs(dot(dy, x)) + 1e-14)
        << "downsample nt " << c.nt;
  }
}

TEST(ScalarResample, StepRatioOneIsTheIdentity) {
  const detail::Resampling r{1, 0.3, 0.5, true};  // the options are ignored, as in Deepwave
  const auto x = random_vector(20, 3);
  std::vector<double> a(20), b(20), c(20), d(20);
  detail::upsample(x.data(), 2, 10, r, a.data());
  detail::upsample_adjoint(x.data(), 2, 10, r, b.data());
  detail::downsample(x.data(), 2, 10, r, c.data());
  detail::downsample_adjoint(x.data(), 2, 10, r, d.data());
  EXPECT_EQ(a, x);
  EXPECT_EQ(b, x);
  EXPECT_EQ(c, x);
  EXPECT_EQ(d, x);
}

TEST(ScalarResample, UpsampleThenDownsampleIsTheIdentityForBandLimitedTraces) {
  // A trace without a Nyquist component survives up- then downsampling (to round-off).
  const std::int64_t nt = 15;  // odd: no Nyquist bin
  const auto x = random_vector(nt, 4);
  const detail::Resampling r{4, 0, 0, false};
  std::vector<double> up(nt * 4), back(nt);
  detail::upsample(x.data(), 1, nt, r, up.data());
  detail::downsample(up.data(), 1, nt, r, back.data());
  EXPECT_LT(relative_l2(back, x), 1e-13);
}

// ---------------------------------------------------------------------------------------------
// Gradient with respect to v against central finite differences

struct FdCase {
  const char* name;
  int ndim;
  std::array<std::int64_t, 3> shape;
  int accuracy;
  Array pml;
  std::int64_t nt;
  double dt_over_cfl;
  std::int64_t nshots, nmodels;
  Array survey_pad = {-1, -1, -1, -1, -1, -1};
  std::array<std::int64_t, 3> lo = {0, 0, 0}, hi = {0, 0, 0};
};

void PrintTo(const FdCase& c, std::ostream* os) {
  *os << c.name;
}

class ScalarGradientFd : public testing::TestWithParam<FdCase> {};

TEST_P(ScalarGradientFd, MatchesCentralDifferences) {
  const FdCase& c = GetParam();
  auto p = random_problem(c.ndim, c.shape, c.nshots, 2, 3, c.nt, c.dt_over_cfl, 5, c.nmodels, c.lo,
                          c.hi);
  ScalarOptions opt;
  opt.accuracy = c.accuracy;
  opt.pml_width = c.pml;
  opt.survey_pad = c.survey_pad;
  opt.max_vel = 2600;  // fixed, so that PML profiles and step ratio do not depend on v
  const ScalarState<double> s0 = random_state(p, opt, 6);
  const ScalarState<double> y_state = random_state(p, opt, 7);
  Problem<double> q = p;
  const auto y_receivers = random_vector(static_cast<std::size_t>(p.nshots * 3 * p.nt), 8);
  auto loss = [&](const std::vector<double>& v) {
    q.v = v;
    const auto out = scalar(kReference, q.input(), opt, &s0);
    return dot(out.receiver_amplitudes, y_receivers) + dot(out.state, y_state, c.ndim);
  };
  const ScalarGradient<double> g = scalar_gradient(
      kReference, p.input(), opt, std::span<const double>(y_receivers), &s0, &y_state);
  ASSERT_EQ(g.v.size(), p.v.size());
  for (std::uint64_t dir = 0; dir < 3; ++dir) {
    const auto delta = random_vector(p.v.size(), 100 + dir);
    const double eps =
        0.05;  // m/s against v ~ 2000 m/s: truncation ~ (eps/v)^2, round-off ~ 1e-16 v/eps
    std::vector<double> plus = p.v, minus = p.v;
    for (std::size_t i = 0; i < p.v.size(); ++i) {
      plus[i] += eps * delta[i];
      minus[i] -= eps * delta[i];
    }
    const double fd = (loss(plus) - loss(minus)) / (2 * eps);
    const double an = dot(g.v, delta);
    // 1e-6 relative: central differences in float64 at this step are good to ~1e-8 here.
    std::printf("%s direction %d: |analytic - finite difference| / |fd| = %.2g\n", c.name,
                static_cast<int>(dir), std::abs(an - fd) / std::abs(fd));
    EXPECT_NEAR(an, fd, 1e-6 * std::abs(fd)) << "direction " << dir;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScalarGradientFd,
    testing::Values(
        FdCase{"d1_acc8_model_per_shot", 1, {40, 1, 1}, 8, {5, 3, 0, 0, 0, 0}, 30, 0.9, 2, 2},
        FdCase{"d2_acc4_resample_window",
               2,
               {16, 14, 1},
               4,
               {3, 4, 2, 5, 0, 0},
               12,
               2.2,
               2,
               1,
               {1, 2, -1, 0, 0, 0},
               {4, 3, 0},
               {12, 11, 1}},
        FdCase{"d3_acc2", 3, {7, 6, 8}, 2, {2, 3, 2, 2, 3, 2}, 10, 0.9, 1, 1}),
    [](const testing::TestParamInfo<FdCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Direct wave in a homogeneous medium against analytic solutions. With the source term
// -v^2 f at one cell of volume h^ndim (a point source -v^2 h^ndim f(t) delta(x)):
//   1D  u = -(v h / 2) F(t - r/v),                    F(t) = int_0^t f = (t - tp) exp(-pi^2 fp^2 (t
//   - tp)^2) 2D  u = -(h^2 / 2 pi) int_0^acosh(vt/r) f(t - (r/v) cosh s) ds   (H0^(2) in time:
//   1/sqrt(t^2 - r^2/v^2)
//                                                                    substituted t = (r/v) cosh s)
//   3D  u = -h^3 f(t - r/v) / (4 pi r)
// Receivers several wavelengths away; Ricker of 25 Hz at 5 m cells (12 cells per wavelength at
// the peak frequency); small time steps so that the spatial error dominates.

double analytic(int ndim, double r, double t, double v, double h, double fp, double tp) {
  if (ndim == 1) {
    const double s = t - r / v - tp;
    return s + tp < 0 ? 0.0
                      : -(v * h / 2) * s *
                            std::exp(-std::numbers::pi * std::numbers::pi * fp * fp * s * s);
  }
  if (ndim == 3)
    return t < r / v ? 0.0 : -h * h * h * ricker(t - r / v, fp, tp) / (4 * std::numbers::pi * r);
  if (v * t <= r) return 0.0;
  const double smax = std::acosh(v * t / r);
  const int n = 4000;  // Simpson on a smooth integrand
  double sum = 0;
  for (int i = 0; i <= n; ++i) {
    const double s = smax * i / n;
    const double tau = t - r / v * std::cosh(s);
    const double f = tau < 0 ? 0.0 : ricker(tau, fp, tp);
    sum += f * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
  }
  return -(h * h / (2 * std::numbers::pi)) * sum * smax / n / 3;
}

// Relative L2 error of the receivers of a homogeneous run against analytic(), per accuracy.
double green_error(int ndim, int accuracy, std::int64_t cells, std::int64_t offset, double courant,
                   std::int64_t pml, double duration) {
  const double v = 1500, h = 5, fp = 25, tp = 1.5 / fp;
  Problem<double> p;
  p.grid.ndim = ndim;
  p.grid.shape = {1, 1, 1};
  for (int d = 0; d < ndim; ++d) {
    p.grid.shape[d] = cells;
    p.grid.spacing[d] = h;
  }
  p.v.assign(static_cast<std::size_t>(p.grid.cells()), v);
  p.dt = courant * h / v;
  p.nt = static_cast<std::int64_t>(duration / p.dt);
  p.nsources = 1;
  p.nreceivers = ndim == 1 ? 2 : 2;
  const std::int64_t c = cells / 2;
  // source at the centre; receivers along an axis and, in 2D/3D, along a diagonal
  std::vector<std::int64_t> src(ndim, c);
  p.sources = src;
  std::vector<double> distance;
  for (int r = 0; r < p.nreceivers; ++r) {
    std::vector<std::int64_t> x(ndim, c);
    if (r == 0 || ndim == 1) {
      x[ndim - 1] = c + (r == 0 ? offset : -offset - 3);
    } else {
      for (int d = 0; d < ndim; ++d) x[d] = c + offset * 7 / 10;
    }
    double d2 = 0;
    for (int d = 0; d < ndim; ++d) d2 += static_cast<double>((x[d] - c) * (x[d] - c)) * h * h;
    distance.push_back(std::sqrt(d2));
    p.receivers.insert(p.receivers.end(), x.begin(), x.end());
  }
  p.amplitudes.resize(static_cast<std::size_t>(p.nt));
  for (std::int64_t t = 0; t < p.nt; ++t)
    p.amplitudes[t] = ricker(static_cast<double>(t) * p.dt, fp, tp);
  ScalarOptions opt;
  opt.accuracy = accuracy;
  opt.pml_width = {pml, pml, pml, pml, pml, pml};
  const auto out = scalar(kReference, p.input(), opt);
  EXPECT_EQ(out.step_ratio, 1);
  std::vector<double> want(out.receiver_amplitudes.size());
  for (int r = 0; r < p.nreceivers; ++r)
    for (std::int64_t t = 0; t < p.nt; ++t)
      want[r * p.nt + t] = analytic(ndim, distance[r], static_cast<double>(t) * p.dt, v, h, fp, tp);
  return relative_l2(out.receiver_amplitudes, want);
}

// Relative L2 error bounds per accuracy 2, 4, 6, 8: the measured errors (printed) times ~1.3.
// The last step is smaller in 3D because the time discretisation (Courant number 0.1) begins to
// dominate there.
void check_green(int ndim, const double (&bound)[4], std::int64_t cells, std::int64_t offset,
                 double courant, std::int64_t pml, double duration) {
  double previous = 1;
  for (int acc = 2; acc <= 8; acc += 2) {
    const double e = green_error(ndim, acc, cells, offset, courant, pml, duration);
    std::printf("%dD accuracy %d: relative L2 error against the analytic solution %.3g\n", ndim,
                acc, e);
    EXPECT_LT(e, bound[acc / 2 - 1]) << ndim << "D accuracy " << acc;
    EXPECT_LT(e, previous) << ndim << "D accuracy " << acc;
    previous = e;
  }
}

TEST(ScalarGreen, OneDimension) {
  const double bound[] = {0.4, 0.035, 0.0045, 0.001};  // measured 0.337, 0.0272, 0.0033, 0.00073
  check_green(1, bound, 400, 40, 0.05, 30, 0.30);
}

TEST(ScalarGreen, TwoDimensions) {
  const double bound[] = {0.22, 0.02, 0.0025, 0.0007};  // measured 0.183, 0.0146, 0.00189, 0.00052
  check_green(2, bound, 60, 20, 0.05, 20, 0.20);
}

TEST(ScalarGreen, ThreeDimensions) {
  const double bound[] = {0.11, 0.01, 0.0016, 0.0012};  // measured 0.0857, 0.0075, 0.00125, 0.00089
  check_green(3, bound, 20, 7, 0.1, 6, 0.12);
}

// ---------------------------------------------------------------------------------------------
// PML: a Ricker pulse from the centre of a homogeneous model; the energy sum u^2 over the whole
// padded grid, sampled every few steps, peaks while the pulse is inside and must fall below
// bound x peak once the pulse has crossed the model three times. Continuing from the state
// (ScalarState) between the samples also exercises continuation.

double pml_energy_ratio(int ndim, int accuracy, std::int64_t cells, std::int64_t pml) {
  const double v = 1500, h = 5, fp = 25, tp = 1.5 / fp;
  Problem<double> p;
  p.grid.ndim = ndim;
  p.grid.shape = {1, 1, 1};
  for (int d = 0; d < ndim; ++d) {
    p.grid.shape[d] = cells;
    p.grid.spacing[d] = h;
  }
  p.v.assign(static_cast<std::size_t>(p.grid.cells()), v);
  p.dt = 0.95 * cfl_dt(p.grid, v);
  const std::int64_t nsource = static_cast<std::int64_t>(2 * tp / p.dt) + 1;
  const double crossing = static_cast<double>(cells) * h * std::sqrt(static_cast<double>(ndim)) / v;
  const std::int64_t nt_total = nsource + static_cast<std::int64_t>(3 * crossing / p.dt);
  ScalarOptions opt;
  opt.accuracy = accuracy;
  opt.pml_width = {pml, pml, pml, pml, pml, pml};
  opt.pml_freq = fp;
  auto energy = [](const ScalarState<double>& st) { return dot(st.wavefield, st.wavefield); };
  // the source, then chunks without it
  p.nsources = 1;
  p.sources.assign(static_cast<std::size_t>(ndim), cells / 2);
  p.nt = nsource;
  p.amplitudes.resize(static_cast<std::size_t>(nsource));
  for (std::int64_t t = 0; t < nsource; ++t)
    p.amplitudes[t] = ricker(static_cast<double>(t) * p.dt, fp, tp);
  ScalarState<double> state = scalar(kReference, p.input(), opt).state;
  double peak = energy(state);
  Problem<double> q = p;
  q.nsources = 0;
  q.sources.clear();
  q.amplitudes.clear();
  q.nt = 10;
  for (std::int64_t t = nsource; t < nt_total; t += q.nt) {
    state = scalar(kReference, q.input(), opt, &state).state;
    peak = std::max(peak, energy(state));
  }
  return energy(state) / peak;
}

TEST(ScalarPml, EnergyLeavesTheModel) {
  // Energy left / peak energy after three crossings. Bounds per accuracy 2, 4, 6, 8: measured
  // values (printed) times ~3. In 1D nothing spreads the energy, and what is left falls with the
  // accuracy (numerical reflection and dispersion of the low orders); in 2D and 3D it is ~1e-6.
  struct Case {
    int ndim;
    std::int64_t cells, pml;
    double bound[4];
  };
  for (const Case& c :
       {Case{1, 80, 15, {3e-4, 3.5e-5, 4e-6, 3e-7}}, Case{2, 40, 12, {1.1e-6, 6e-6, 3.3e-6, 2e-6}},
        Case{3, 16, 8, {2.5e-6, 1.1e-6, 7e-7, 3.5e-7}}})
    for (int acc = 2; acc <= 8; acc += 2) {
      const double ratio = pml_energy_ratio(c.ndim, acc, c.cells, c.pml);
      std::printf("PML %dD accuracy %d: energy left / peak %.3g\n", c.ndim, acc, ratio);
      EXPECT_LT(ratio, c.bound[acc / 2 - 1]) << c.ndim << "D accuracy " << acc;
    }
}

// ---------------------------------------------------------------------------------------------
// Deepwave v0.1 on small problems. Where the numerics are identical (step_ratio 1, or receivers
// and source gradients with resampling) the tolerance is round-off: relative L2 1e-10 in
// float64, 1e-5 in float32 (the float64 references were made with torch's default dtype float64:
// Deepwave builds its Hann window and frequency taper in the default dtype, float32 otherwise,
// which alone makes ~1e-7 differences). With step_ratio > 1 Deepwave's model gradient stores the
// wavefield every step_ratio inner steps only (an approximation); ours stores every inner step, so
// grad_v is not compared there (the case says compare_grad_v false).

nlohmann::json deepwave_reference() {
  // The folder comes from tests/CMakeLists.txt (an absolute path; __FILE__ may be relative).
  const auto path =
      std::filesystem::path(SCIPROXY_TEST_DATA_DIR) / "deepwave_scalar_reference.json";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return f.good() ? nlohmann::json::parse(f) : nlohmann::json::object();
}

template <class T>
void compare_with_deepwave(const nlohmann::json& c) {
  SCOPED_TRACE(c["name"].get<std::string>());
  Problem<T> p;
  const auto shape = c["shape"].get<std::vector<std::int64_t>>();
  const auto spacing = c["spacing"].get<std::vector<double>>();
  p.grid.ndim = static_cast<int>(shape.size());
  p.grid.shape = {1, 1, 1};
  for (int d = 0; d < p.grid.ndim; ++d) {
    p.grid.shape[d] = shape[d];
    p.grid.spacing[d] = spacing[d];
  }
  p.nshots = c["nshots"];
  p.nmodels = c["nmodels"];
  p.nsources = c["nsources"];
  p.nreceivers = c["nreceivers"];
  p.nt = c["nt"];
  p.dt = c["dt"];
  p.v = c["v"].get<std::vector<T>>();
  p.amplitudes = c["source_amplitudes"].get<std::vector<T>>();
  p.sources = c["source_locations"].get<std::vector<std::int64_t>>();
  p.receivers = c["receiver_locations"].get<std::vector<std::int64_t>>();
  ScalarOptions opt;
  opt.accuracy = c["accuracy"];
  const auto pml = c["pml_width"].get<std::vector<std::int64_t>>();
  const auto pad = c["survey_pad"].get<std::vector<std::int64_t>>();
  for (std::size_t i = 0; i < pml.size(); ++i) {
    opt.pml_width[i] = pml[i];
    opt.survey_pad[i] = pad[i];
  }
  opt.pml_freq = c["pml_freq"];
  opt.max_vel = c["max_vel"];
  opt.freq_taper_frac = c["freq_taper_frac"];
  opt.time_pad_frac = c["time_pad_frac"];
  opt.time_taper = c["time_taper"];
  const auto weights = c["receiver_weights"].get<std::vector<T>>();
  const ScalarGradient<T> g =
      scalar_gradient(kReference, p.input(), opt, std::span<const T>(weights));
  EXPECT_EQ(g.forward.step_ratio, c["step_ratio"].get<std::int64_t>());
  const double tol = sizeof(T) == 8 ? 1e-10 : 1e-5;
  const double e_rec =
      relative_l2(g.forward.receiver_amplitudes, c["receivers"].get<std::vector<double>>());
  const double e_src =
      relative_l2(g.source_amplitudes, c["grad_source_amplitudes"].get<std::vector<double>>());
  std::printf("%s: receivers %.2g, source gradient %.2g", c["name"].get<std::string>().c_str(),
              e_rec, e_src);
  EXPECT_LT(e_rec, tol);
  EXPECT_LT(e_src, tol);
  if (c["compare_grad_v"].get<bool>()) {
    const double e_v = relative_l2(g.v, c["grad_v"].get<std::vector<double>>());
    std::printf(", grad_v %.2g", e_v);
    EXPECT_LT(e_v, tol);
  }
  if (c.contains("final_wavefield")) {
    // Deepwave's final wavefield leaves out the stencil halo of accuracy/2 cells per side.
    const std::int64_t h = opt.accuracy / 2;
    const auto& n = g.forward.state.padded_shape;
    std::vector<T> inner;
    for (std::int64_t s = 0; s < p.nshots; ++s)
      for (std::int64_t i0 = 0; i0 < n[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < n[1]; ++i1)
          for (std::int64_t i2 = 0; i2 < n[2]; ++i2) {
            const std::array<std::int64_t, 3> x = {i0, i1, i2};
            bool halo = false;
            for (int d = 0; d < p.grid.ndim; ++d) halo = halo || x[d] < h || x[d] >= n[d] - h;
            if (!halo)
              inner.push_back(g.forward.state.wavefield[((s * n[0] + i0) * n[1] + i1) * n[2] + i2]);
          }
    const double e_u = relative_l2(inner, c["final_wavefield"].get<std::vector<double>>());
    std::printf(", final wavefield %.2g", e_u);
    EXPECT_LT(e_u, tol);
  }
  std::printf("\n");
}

TEST(ScalarDeepwave, ReceiversAndGradients) {
  const nlohmann::json ref = deepwave_reference();
  ASSERT_TRUE(ref.contains("cases"));
  std::printf("Deepwave %s (relative L2 differences)\n",
              ref["deepwave_version"].get<std::string>().c_str());
  for (const auto& c : ref["cases"]) {
    if (c["dtype"] == "float64")
      compare_with_deepwave<double>(c);
    else
      compare_with_deepwave<float>(c);
  }
}

TEST(ScalarDeepwave, Resampling) {
  const nlohmann::json ref = deepwave_reference();
  ASSERT_TRUE(ref.contains("resample"));
  for (const auto& c : ref["resample"]) {
    const detail::Resampling r{c["step_ratio"], c["freq_taper_frac"], c["time_pad_frac"],
                               c["time_taper"]};
    const std::int64_t nt = c["nt"];
    const auto x = c["x"].get<std::vector<double>>(), y = c["y"].get<std::vector<double>>();
    const std::int64_t ntr = static_cast<std::int64_t>(x.size()) / nt;
    std::vector<double> up(y.size()), down(x.size());
    detail::upsample(x.data(), ntr, nt, r, up.data());
    detail::downsample(y.data(), ntr, nt, r, down.data());
    // torch's FFT against FFTW, both double: 1e-13.
    EXPECT_LT(relative_l2(up, c["upsampled"].get<std::vector<double>>()), 1e-13) << "nt " << nt;
    EXPECT_LT(relative_l2(down, c["downsampled"].get<std::vector<double>>()), 1e-13) << "nt " << nt;
  }
}
}  // namespace
