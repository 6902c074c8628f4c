// Reference backend of the TTI workshop demo operator against hand-derived results:
// - the staggered derivatives D+ and D- of order A are exact on polynomials of degree < A+1;
// - with eps = eta = 0 one step is u+ = (2-d) u + (d-1) u- + dt^2 vp^2/b D-.(b D+ u), the
//   variable-density Laplacian written out independently here;
// - the linear part of the spatial operator is symmetric: <L u, w> = <u, L w>;
// - a plane wave cos(k.x) in a constant anisotropic medium: away from the edges
//   L u = -sum_ab C_ab sigma_a sigma_b cos(k.x + (k_b h_b - k_a h_a)/2), sigma_a the symbol of
//   the staggered derivative, C = b(1+2eps)(I - n n^T) + b(1 - f eta^2) n n^T;
// - trilinear injection: the corner weights reproduce the source position; the injected values;
// - a long run at 0.9 of the stability limit stays bounded; bad input is refused by name.
// Tolerances: relative norms in float64, 1e-12 (the same arithmetic in another order) or 1e-10
// (the analytic plane wave, whose closed form rounds differently).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti/math.hpp"
#include "tti_demo_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;
using sciproxy::test::TtiDemoProblem;

namespace {

const Device kReference{Backend::reference, 0, false};

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

template <int A>
void check_polynomial_exactness() {
  // The order-A staggered derivative is exact for degree <= A (its error is O(h^A) f^(A+1)):
  // p(x) = sum_j a_j x^j of degree A.
  std::mt19937 rng(A);
  std::uniform_real_distribution<double> coef(-1, 1);
  std::vector<double> a(A + 1);
  for (auto& x : a) x = coef(rng);
  const double h = 0.25;
  auto p = [&](double x) {
    double s = 0;
    for (int j = A; j >= 0; --j) s = s * x + a[j];
    return s;
  };
  auto dp = [&](double x) {
    double s = 0;
    for (int j = A; j >= 1; --j) s = s * x + j * a[j];
    return s;
  };
  std::vector<double> f(64);
  for (int i = 0; i < 64; ++i) f[i] = p((i - 32) * h);
  for (int i = A; i < 64 - A; ++i) {
    const double x = (i - 32) * h;
    const double plus = tti::staggered_forward<A>(f.data() + i, 1L, 1 / h);    // at x + h/2
    const double minus = tti::staggered_backward<A>(f.data() + i, 1L, 1 / h);  // at x - h/2
    EXPECT_NEAR(plus, dp(x + h / 2), 1e-9 * (1 + std::abs(dp(x + h / 2))))
        << "A=" << A << " i=" << i;
    EXPECT_NEAR(minus, dp(x - h / 2), 1e-9 * (1 + std::abs(dp(x - h / 2))))
        << "A=" << A << " i=" << i;
  }
  // And not exact one degree up (the test can fail): x^(A+1) has a non-zero error.
  std::vector<double> g(64);
  for (int i = 0; i < 64; ++i) g[i] = std::pow(i - 32.0, A + 1);  // h = 1
  const double exact = (A + 1) * std::pow(0.5, A);
  EXPECT_GT(std::abs(tti::staggered_forward<A>(g.data() + 32, 1L, 1.0) - exact), 1e-3);
}

// One reference step from u0 (u_prev0, no source amplitude) in float64.
std::vector<double> one_step(TtiDemoProblem<double> p, const std::vector<double>& u0,
                             const std::vector<double>& u_prev0, int order = 8) {
  p.nt = 1;
  p.u0 = u0;
  p.u_prev0 = u_prev0;
  p.amplitudes = {0.0};
  TtiDemoOptions opt;
  opt.space_order = order;
  return tti_demo<double>(kReference, p.input(), opt).u;
}

// Materials with vp^2 / b = const (so that m = dt^2 vp^2/b is one number) and no damping.
TtiDemoProblem<double> symmetric_problem(int order, unsigned seed, bool isotropic) {
  auto p = test::random_tti_problem<double>({16, 17, 18}, 1, order, seed, false);
  for (std::size_t i = 0; i < p.b.size(); ++i) {
    p.vp[i] = 2000 * std::sqrt(p.b[i]);
    p.damping[i] = 0;
    if (isotropic) p.epsilon[i] = p.eta[i] = 0;
  }
  p.dt = 0.5 * tti_demo_dt_limit(p.input(), order);
  return p;
}

std::vector<double> random_field(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = unit(rng);
  return v;
}

template <int A>
void check_isotropic_laplacian() {
  auto p = test::random_tti_problem<double>({16, 17, 18}, 1, A, 100 + A, false);
  for (std::size_t i = 0; i < p.b.size(); ++i) p.epsilon[i] = p.eta[i] = 0;
  p.dt = 0.5 * tti_demo_dt_limit(p.input(), A);
  const auto n = p.shape;
  const auto u0 = random_field(p.points(), 1), um = random_field(p.points(), 2);
  const auto got = one_step(p, u0, um, A);

  // Independently: pad with A/2 zeros, flux b D+ u per axis on the grid, D- of it.
  constexpr int M = A / 2;
  const std::array<std::int64_t, 3> np = {n[0] + 2 * M, n[1] + 2 * M, n[2] + 2 * M};
  auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    return ((i + M) * np[1] + j + M) * np[2] + k + M;
  };
  const std::array<long, 3> stride = {static_cast<long>(np[1] * np[2]), static_cast<long>(np[2]),
                                      1};
  std::vector<double> u(np[0] * np[1] * np[2], 0.0);
  std::array<std::vector<double>, 3> flux;
  for (auto& f : flux) f.assign(u.size(), 0.0);
  for (std::int64_t i = 0; i < n[0]; ++i)
    for (std::int64_t j = 0; j < n[1]; ++j)
      for (std::int64_t k = 0; k < n[2]; ++k) u[at(i, j, k)] = u0[(i * n[1] + j) * n[2] + k];
  for (std::int64_t i = 0; i < n[0]; ++i)
    for (std::int64_t j = 0; j < n[1]; ++j)
      for (std::int64_t k = 0; k < n[2]; ++k)
        for (int d = 0; d < 3; ++d)
          flux[d][at(i, j, k)] =
              p.b[(i * n[1] + j) * n[2] + k] *
              tti::staggered_forward<A>(u.data() + at(i, j, k), stride[d], 1 / p.spacing[d]);
  std::vector<double> expected(u0.size());
  for (std::int64_t i = 0; i < n[0]; ++i)
    for (std::int64_t j = 0; j < n[1]; ++j)
      for (std::int64_t k = 0; k < n[2]; ++k) {
        const std::int64_t q = (i * n[1] + j) * n[2] + k;
        double div = 0;
        for (int d = 0; d < 3; ++d)
          div +=
              tti::staggered_backward<A>(flux[d].data() + at(i, j, k), stride[d], 1 / p.spacing[d]);
        const double d = p.damping[q];
        expected[q] =
            (2 - d) * u0[q] + (d - 1) * um[q] + p.dt * p.dt * p.vp[q] * p.vp[q] / p.b[q] * div;
      }
  EXPECT_LT(rel_l2(got, expected), 1e-12) << "A=" << A;
}

}  // namespace

TEST(TtiDemoReference, StaggeredDerivativesExactOnPolynomials) {
  check_polynomial_exactness<4>();
  check_polynomial_exactness<8>();
  check_polynomial_exactness<12>();
  check_polynomial_exactness<16>();
}

TEST(TtiDemoReference, IsotropicIsTheVariableDensityLaplacian) {
  check_isotropic_laplacian<4>();
  check_isotropic_laplacian<8>();
  check_isotropic_laplacian<12>();
  check_isotropic_laplacian<16>();
}

TEST(TtiDemoReference, SpatialOperatorIsSymmetric) {
  for (int order : {4, 8, 16}) {
    const auto p = symmetric_problem(order, 7 + order, false);
    const double m = p.dt * p.dt * p.vp[0] * p.vp[0] / p.b[0];
    const std::vector<double> zero(p.points(), 0.0);
    const auto base = one_step(p, zero, zero, order);  // the affine part D-.(s n)
    auto apply = [&](const std::vector<double>& u) {
      auto out = one_step(p, u, zero, order);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = (out[i] - base[i] - 2 * u[i]) / m;
      return out;
    };
    const auto u = random_field(p.points(), 11), w = random_field(p.points(), 12);
    const auto lu = apply(u), lw = apply(w);
    const double a = std::inner_product(lu.begin(), lu.end(), w.begin(), 0.0);
    const double b = std::inner_product(u.begin(), u.end(), lw.begin(), 0.0);
    EXPECT_LT(std::abs(a - b) / std::abs(a), 1e-12)
        << "order " << order << ": " << a << " vs " << b;
    // Not trivially symmetric: the operator is not a multiple of the identity, and the
    // anisotropic terms matter (the isotropic operator of the same b differs).
    EXPECT_GT(std::abs(a), 1e-3);
    auto iso = p;
    for (std::size_t i = 0; i < iso.b.size(); ++i) iso.epsilon[i] = iso.eta[i] = 0;
    const auto lu_iso = one_step(iso, u, zero, order);
    const auto lu_full = one_step(p, u, zero, order);
    EXPECT_GT(rel_l2(lu_iso, lu_full), 1e-3);
  }
}

TEST(TtiDemoReference, PlaneWaveMatchesTheDiscreteSymbol) {
  constexpr int A = 8, M = A / 2;
  TtiDemoProblem<double> p = test::constant_tti_problem<double>({40, 36, 44}, 1, A);
  p.spacing = {10, 12, 8};
  p.damping = {0.0};
  const double th = p.theta[0], ph = p.phi[0], b = p.b[0], eps = p.epsilon[0], eta = p.eta[0],
               f = p.f[0];
  p.dt = 0.5 * tti_demo_dt_limit(p.input(), A);
  const double m = p.dt * p.dt * p.vp[0] * p.vp[0] / b;
  const std::array<double, 3> k = {0.021, -0.017, 0.033};  // rad/m, below Nyquist on every axis
  std::vector<double> u0(p.points());
  for (std::int64_t i = 0; i < p.shape[0]; ++i)
    for (std::int64_t j = 0; j < p.shape[1]; ++j)
      for (std::int64_t l = 0; l < p.shape[2]; ++l)
        u0[(i * p.shape[1] + j) * p.shape[2] + l] =
            std::cos(k[0] * i * p.spacing[0] + k[1] * j * p.spacing[1] + k[2] * l * p.spacing[2]);
  const auto u1 = one_step(p, u0, std::vector<double>(p.points(), 0.0), A);

  const double n[3] = {std::sin(th) * std::sin(ph), std::sin(th) * std::cos(ph), std::cos(th)};
  double C[3][3];
  for (int a = 0; a < 3; ++a)
    for (int c = 0; c < 3; ++c)
      C[a][c] =
          b * (1 + 2 * eps) * ((a == c) - n[a] * n[c]) + b * (1 - f * eta * eta) * n[a] * n[c];
  double sigma[3], theta_h[3];
  for (int a = 0; a < 3; ++a) {
    theta_h[a] = k[a] * p.spacing[a];
    sigma[a] = 0;
    for (int q = 1; q <= M; ++q)
      sigma[a] += tti::staggered_coefficient<A>(q) * std::sin((2 * q - 1) * theta_h[a] / 2);
    sigma[a] *= 2 / p.spacing[a];
  }
  std::vector<double> got, expected;
  for (std::int64_t i = 2 * M; i < p.shape[0] - 2 * M; ++i)
    for (std::int64_t j = 2 * M; j < p.shape[1] - 2 * M; ++j)
      for (std::int64_t l = 2 * M; l < p.shape[2] - 2 * M; ++l) {
        const std::int64_t q = (i * p.shape[1] + j) * p.shape[2] + l;
        const double phase =
            k[0] * i * p.spacing[0] + k[1] * j * p.spacing[1] + k[2] * l * p.spacing[2];
        double lu = 0;
        for (int a = 0; a < 3; ++a)
          for (int c = 0; c < 3; ++c)
            lu -= C[a][c] * sigma[a] * sigma[c] * std::cos(phase + (theta_h[c] - theta_h[a]) / 2);
        got.push_back((u1[q] - 2 * u0[q]) / m);
        expected.push_back(lu);
      }
  ASSERT_FALSE(got.empty());
  EXPECT_LT(rel_l2(got, expected), 1e-10);
}

TEST(TtiDemoReference, TrilinearInjection) {
  auto p = test::constant_tti_problem<double>({10, 11, 12}, 1);
  p.eta = {0.0};  // no constant flux term, so that only the source moves u
  p.source_position = {43.0, 51.5, 66.25};  // cells (4.3, 5.15, 6.625)
  p.amplitudes = {2.5};
  const auto out = tti_demo<double>(kReference, p.input(), TtiDemoOptions{});
  const double m = p.dt * p.dt * p.vp[0] * p.vp[0] / p.b[0];
  double total = 0, moment[3] = {0, 0, 0};
  for (std::int64_t i = 0; i < p.shape[0]; ++i)
    for (std::int64_t j = 0; j < p.shape[1]; ++j)
      for (std::int64_t l = 0; l < p.shape[2]; ++l) {
        const double w = out.u[(i * p.shape[1] + j) * p.shape[2] + l] / (m * 2.5);
        const bool corner = (i == 4 || i == 5) && (j == 5 || j == 6) && (l == 6 || l == 7);
        if (!corner) {
          EXPECT_EQ(w, 0.0) << i << " " << j << " " << l;
        }
        total += w;
        moment[0] += w * i;
        moment[1] += w * j;
        moment[2] += w * l;
      }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(moment[0], 4.3, 1e-12);
  EXPECT_NEAR(moment[1], 5.15, 1e-12);
  EXPECT_NEAR(moment[2], 6.625, 1e-12);
  EXPECT_NEAR(out.u[(4 * 11 + 5) * 12 + 6] / (m * 2.5), 0.7 * 0.85 * 0.375, 1e-12);
}

TEST(TtiDemoReference, StaysBoundedBelowTheStabilityLimit) {
  auto p = test::random_tti_problem<double>({10, 9, 11}, 400, 8, 5, true);
  for (auto& d : p.damping) d = 0;
  p.dt = 0.95 * tti_demo_dt_limit(p.input(), 8);
  p.amplitudes.assign(p.nt, 0.0);
  const auto out = tti_demo<double>(kReference, p.input(), TtiDemoOptions{});
  double peak = 0;
  for (double v : out.u) {
    ASSERT_TRUE(std::isfinite(v));
    peak = std::max(peak, std::abs(v));
  }
  EXPECT_LT(peak, 1e3);  // an unstable mode would grow by orders of magnitude in 400 steps
  // The limit itself: constant isotropic vp, h: h / (vp sqrt(3) sum |c_k|) (no damping).
  auto iso = test::constant_tti_problem<double>({8, 8, 8}, 1);
  iso.epsilon = {0.0};
  iso.eta = {0.0};
  iso.damping = {0.0};
  double c = 0;
  for (int k = 1; k <= 4; ++k) c += std::abs(tti::staggered_coefficient<8>(k));
  EXPECT_NEAR(tti_demo_dt_limit(iso.input(), 8), 10.0 / (1500 * std::sqrt(3.0) * c), 1e-12);
}

namespace {

// Runs f on a copy of the constant problem and expects InvalidArgument mentioning `word`.
template <class F>
void expect_refused(F&& modify, const std::string& word, int order = 8) {
  auto p = test::constant_tti_problem<float>({12, 12, 12}, 5);
  TtiDemoOptions opt;
  opt.space_order = order;
  modify(p, opt);
  try {
    (void)tti_demo<float>(kReference, p.input(), opt);
    ADD_FAILURE() << "no error; expected one mentioning " << word;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(TtiDemoReference, BadInputIsRefusedByName) {
  using P = TtiDemoProblem<float>;
  expect_refused([](P& p, TtiDemoOptions&) { p.shape[1] = 5; }, "shape[1] (y)");
  expect_refused([](P&, TtiDemoOptions& o) { o.space_order = 6; }, "space_order");
  expect_refused([](P&, TtiDemoOptions& o) { o.cpu.tile_rows = -1; }, "cpu.tile_rows");
  expect_refused([](P&, TtiDemoOptions& o) { o.cpu.tile_kib = 0; }, "cpu.tile_kib");
  expect_refused([](P&, TtiDemoOptions& o) { o.cpu.block_rows = 0; }, "cpu.block_rows");
  expect_refused([](P&, TtiDemoOptions& o) { o.cpu.sweep_steps = 3; }, "cpu.sweep_steps");
  expect_refused([](P& p, TtiDemoOptions&) { p.spacing[2] = 0; }, "spacing[2]");
  expect_refused([](P& p, TtiDemoOptions&) { p.spacing[0] = -10; }, "spacing[0]");
  expect_refused([](P& p, TtiDemoOptions&) { p.dt *= 1.5; }, "stability limit");
  expect_refused([](P& p, TtiDemoOptions&) { p.dt = std::numeric_limits<double>::quiet_NaN(); },
                 "dt");
  expect_refused([](P& p, TtiDemoOptions&) { p.vp = {std::numeric_limits<float>::quiet_NaN()}; },
                 "vp");
  expect_refused([](P& p, TtiDemoOptions&) { p.vp = {-1500}; }, "vp");
  expect_refused([](P& p, TtiDemoOptions&) { p.b = {0}; }, "b:");
  expect_refused([](P& p, TtiDemoOptions&) { p.eta = {1.5}; }, "eta");
  expect_refused([](P& p, TtiDemoOptions&) { p.epsilon = {-0.7}; }, "epsilon");
  expect_refused([](P& p, TtiDemoOptions&) { p.damping = {2}; }, "damping");
  expect_refused([](P& p, TtiDemoOptions&) { p.theta.assign(7, 0.1f); }, "theta");
  expect_refused([](P& p, TtiDemoOptions&) { p.source_position[0] = 1e6; }, "source_position[0]");
  expect_refused([](P& p, TtiDemoOptions&) { p.amplitudes.pop_back(); }, "source_amplitudes");
  expect_refused([](P& p, TtiDemoOptions&) { p.amplitudes[2] = INFINITY; }, "source_amplitudes");
  expect_refused(
      [](P& p, TtiDemoOptions&) {
        p.nt = 0;
        p.amplitudes.clear();
      },
      "nt");
  expect_refused([](P& p, TtiDemoOptions&) { p.u0.assign(10, 0.f); }, "initial_u");
  expect_refused(
      [](P& p, TtiDemoOptions& o) {
        o.space_order = 16;
        p.shape = {16, 16, 15};
      },
      "shape[2] (z)", 16);
  EXPECT_THROW(parse_tti_demo_form("triple"), InvalidArgument);
  EXPECT_EQ(parse_tti_demo_form("two-pass"), TtiDemoForm::two_pass);
  EXPECT_EQ(parse_tti_demo_form("fused"), TtiDemoForm::fused);
}
