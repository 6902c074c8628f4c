// The TTI workshop demo operator on the backend under test (tests/common/backend_test.hpp: cpu,
// or cuda with the label gpu), both forms (two-pass and fused), against the reference on small
// grids with random materials per point, random initial fields and a source at a random non-grid
// point; space orders 4 to 16, float32 and float64, odd and even step counts, grids larger than a
// fused tile (cpu: y > 32, z > 128; cuda: several 32 x 16 tiles) so that tile borders are
// crossed; the demo's constant materials from rest; the section table and work model; thread
// counts. The two forms against each other; on cuda also against the cpu backend's two-pass form
// (the same per-point arithmetic, math.hpp) and a bad device index; a recorded call verified
// against the reference.
// Tolerances: src/tti/case.hpp (tti_demo_tolerance against the reference; the forms and cuda
// against cpu: tti_demo_forms_tolerance, tti_demo_backends_tolerance).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/recording.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti/case.hpp"
#include "tti_demo_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;
using test::kBackend;
using test::kReference;
using test::kTestingCuda;

namespace {

const Device kCpu{Backend::cpu, 0, false};

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const Tolerance& tol,
                  const std::string& what) {
  const Comparison c = compare<T, T>(std::span<const T>(got), std::span<const T>(want), tol);
  EXPECT_TRUE(c.pass) << what << ": " << c.summary();
}

template <class T>
void check(std::array<std::int64_t, 3> shape, std::int64_t nt, int order, unsigned seed,
           bool random_state = true) {
  const auto p = test::random_tti_problem<T>(shape, nt, order, seed, random_state);
  constexpr Precision precision = precision_of<T>();
  TtiDemoOptions opt;
  opt.space_order = order;
  const auto ref = tti_demo<T>(kReference, p.input(), opt);
  const std::string what = std::string(sizeof(T) == 4 ? "float32" : "float64") + " order " +
                           std::to_string(order) + " nt " + std::to_string(nt);
  TtiDemoOutput<T> cpu;
  if constexpr (kTestingCuda) {
    opt.form = TtiDemoForm::two_pass;
    cpu = tti_demo<T>(kCpu, p.input(), opt);
  }
  std::vector<T> two_pass_u;
  for (TtiDemoForm form : {TtiDemoForm::two_pass, TtiDemoForm::fused}) {
    opt.form = form;
    Timers timers;
    const auto out = tti_demo<T>(kBackend, p.input(), opt, &timers);
    const std::string w = what + " " + tti_demo_form_name(form);
    expect_close(out.u, ref.u, tti_demo_tolerance(precision), w + " u");
    expect_close(out.u_prev, ref.u_prev, tti_demo_tolerance(precision), w + " u_prev");
    EXPECT_GT(out.sections.front().seconds, 0.0) << w << ": no time recorded";
    if (form == TtiDemoForm::two_pass) {
      two_pass_u = out.u;
      ASSERT_EQ(out.sections.size(), 3u);
      EXPECT_EQ(out.sections[0].name, "flux pass");
    } else {
      expect_close(out.u, two_pass_u,
                   kTestingCuda ? tti_demo_backends_tolerance(precision)
                                : tti_demo_forms_tolerance(precision),
                   w + " vs two-pass");
      ASSERT_EQ(out.sections.size(), 2u);
      EXPECT_EQ(out.sections[0].name, "fused flux + divergence");
    }
    EXPECT_EQ(out.work.points, static_cast<double>(shape[0] * shape[1] * shape[2] * nt));
    if constexpr (kTestingCuda) {
      expect_close(out.u, cpu.u, tti_demo_backends_tolerance(precision), w + " u vs cpu");
      expect_close(out.u_prev, cpu.u_prev, tti_demo_backends_tolerance(precision),
                   w + " u_prev vs cpu");
    }
  }
}

class TtiDemoBackend : public test::BackendTest {};

TEST_F(TtiDemoBackend, MatchesReferenceFloat64AllOrders) {
  for (int order : {4, 8, 12, 16}) {
    check<double>({17, 19, 21}, 7, order, 40 + order);
    // z: a partly filled CUDA block; x at least the span of the stencil (order 16 refuses 13).
    check<double>({std::max<std::int64_t>(13, order), 21, 37}, 6, order, 20 + order);
  }
}

TEST_F(TtiDemoBackend, MatchesReferenceFloat32AllOrders) {
  for (int order : {4, 8, 12, 16}) {
    check<float>({16, 18, 20}, 8, order, 60 + order);
    check<float>({17, 19, 45}, 7, order, 10 + order);
  }
}

TEST_F(TtiDemoBackend, CrossesFusedTileBorders) {
  check<float>({12, 70, 150}, 5, 8, 3);
  check<double>({16, 40, 140}, 4, 16, 4, false);  // from rest: the source and the boundary term
  check<float>({40, 70, 150}, 12, 8, 5);
  check<float>({33, 50, 97}, 9, 16, 6);
}

TEST_F(TtiDemoBackend, DemoMaterialsFromRest) {
  // The CLI demo's constant materials: the field comes from the source and the edges only.
  const auto p = test::constant_tti_problem<float>({24, 20, 30}, 30);
  const auto ref = tti_demo<float>(kReference, p.input(), TtiDemoOptions{});
  for (TtiDemoForm form : {TtiDemoForm::two_pass, TtiDemoForm::fused}) {
    TtiDemoOptions opt;
    opt.form = form;
    expect_close(tti_demo<float>(kBackend, p.input(), opt).u, ref.u,
                 tti_demo_tolerance(Precision::fp32), tti_demo_form_name(form));
  }
}

TEST_F(TtiDemoBackend, ThreadCountDoesNotChangeTheResult) {
  const auto p = test::random_tti_problem<double>({10, 40, 30}, 3, 8, 9);
  TtiDemoOptions one, two;
  one.nparallel = 1;
  two.nparallel = 2;
  EXPECT_EQ(tti_demo<double>(kBackend, p.input(), one).u,
            tti_demo<double>(kBackend, p.input(), two).u);
}

// The cpu backend's block sizes (TtiDemoCpuTuning) change how the grid is swept, never a result:
// the same bits for tiny and whole-grid fused tiles and two-pass blocks (cuda ignores them).
TEST_F(TtiDemoBackend, TuningDoesNotChangeTheResult) {
  const auto p = test::random_tti_problem<float>({12, 37, 40}, 5, 8, 21);
  for (TtiDemoForm form : {TtiDemoForm::fused, TtiDemoForm::two_pass}) {
    TtiDemoOptions base;
    base.form = form;
    base.nparallel = 2;
    base.cpu.sweep_steps = 1;
    const auto want = tti_demo<float>(kBackend, p.input(), base).u;
    for (int steps : {1, 2})
      for (std::int64_t rows : {1, 5, 37, 200}) {
        TtiDemoOptions opt = base;
        opt.cpu.tile_rows = rows;
        opt.cpu.block_rows = rows;
        opt.cpu.sweep_steps = steps;
        EXPECT_EQ(tti_demo<float>(kBackend, p.input(), opt).u, want)
            << tti_demo_form_name(form) << " rows " << rows << " steps per sweep " << steps;
      }
    TtiDemoOptions small = base;
    small.cpu.tile_kib = 1;  // the automatic rule down to its smallest tiles
    EXPECT_EQ(tti_demo<float>(kBackend, p.input(), small).u, want) << tti_demo_form_name(form);
  }
  // The autotuner's trials run on copies of the fields and its choice changes no bit; it caches
  // in a directory of this test's own, not the user's.
  const auto cache = std::filesystem::temp_directory_path() /
                     ("sciproxy_tti_autotune_" + std::to_string(getpid()));
  const char* old = std::getenv("SCIPROXY_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("SCIPROXY_CACHE_DIR", cache.c_str(), 1);
  TtiDemoOptions tuned;
  tuned.nparallel = 2;
  tuned.cpu.sweep_steps = 1;
  const auto want = tti_demo<float>(kBackend, p.input(), tuned).u;
  tuned.autotune = true;
  const auto got = tti_demo<float>(kBackend, p.input(), tuned).u;
  const bool cached = std::filesystem::exists(cache / "autotune.json");
  if (old)
    setenv("SCIPROXY_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("SCIPROXY_CACHE_DIR");
  std::filesystem::remove_all(cache);
  EXPECT_EQ(got, want);
  EXPECT_EQ(cached, kBackend.backend == Backend::cpu);
}

// Tilts with |nz| >= 1/8 everywhere, nz of both signs: the cpu fused kernel derives nz from nx and
// ny (demo_api.cpp, nz_derivable) with n and s negated where nz < 0.
template <class T>
test::TtiDemoProblem<T> tilted_problem(std::array<std::int64_t, 3> shape, std::int64_t nt,
                                       unsigned seed) {
  auto p = test::random_tti_problem<T>(shape, nt, 8, seed);
  for (std::size_t q = 0; q < p.theta.size(); ++q)  // [-1.5, 1.5] onto [0.3, 1.2] or [2, 2.9]
    p.theta[q] = static_cast<T>((q % 2 ? 2.0 : 0.3) + 0.3 * (p.theta[q] + 1.5));
  return p;
}

template <class T>
void check_derived_nz(std::array<std::int64_t, 3> shape, unsigned seed) {
  const auto p = tilted_problem<T>(shape, 6, seed);
  const auto ref = tti_demo<T>(kReference, p.input(), TtiDemoOptions{});
  TtiDemoOptions base;
  base.nparallel = 1;
  base.cpu.sweep_steps = 1;
  const auto want = tti_demo<T>(kBackend, p.input(), base);
  expect_close(want.u, ref.u, tti_demo_tolerance(precision_of<T>()), "derived nz u");
  expect_close(want.u_prev, ref.u_prev, tti_demo_tolerance(precision_of<T>()), "u_prev");
  for (int steps : {1, 2})
    for (std::int64_t rows : {1, 7, 200}) {
      TtiDemoOptions opt = base;
      opt.nparallel = 2;
      opt.cpu.tile_rows = rows;
      opt.cpu.sweep_steps = steps;
      EXPECT_EQ(tti_demo<T>(kBackend, p.input(), opt).u, want.u)
          << "rows " << rows << " steps per sweep " << steps;
    }
}

TEST_F(TtiDemoBackend, DerivedNzMatchesReference) {
  check_derived_nz<float>({12, 37, 40}, 23);
  check_derived_nz<double>({11, 20, 35}, 24);
}

// The work model counts the arrays each section's loops move per point and step (demo_api.cpp,
// demo_traffic): fused 11 (u, u-, eight coefficients, u+), 3 with constant materials on cpu
// (one value per coefficient); on cpu with two steps per sweep 14 per pair of steps (u, u-, the
// coefficients, two outputs and their write-allocate), an odd last step 11, one less each where
// the cpu derives nz (seven coefficients); two-pass flux 10
// plus 3 on cpu (its flux stores allocate lines), divergence 8. Injection: 8 corners per step.
TEST_F(TtiDemoBackend, WorkModelCountsTheBytesMoved) {
  const std::array<std::int64_t, 3> shape = {10, 11, 12};
  const std::int64_t nt = 3;
  const double points = 10.0 * 11 * 12 * nt, es = sizeof(float);
  const bool cpu = kBackend.backend == Backend::cpu;
  const auto varying = test::random_tti_problem<float>(shape, nt, 8, 31);
  const auto constant = test::constant_tti_problem<float>(shape, nt);
  auto bytes_of = [&](const auto& problem, TtiDemoForm form, int sweep_steps = 1) {
    TtiDemoOptions opt;
    opt.form = form;
    opt.cpu.sweep_steps = sweep_steps;
    const auto out = tti_demo<float>(kBackend, problem.input(), opt);
    std::vector<double> bytes;
    for (const auto& s : out.sections) bytes.push_back(s.work.bytes);
    double total = 0;
    for (double b : bytes) total += b;
    EXPECT_DOUBLE_EQ(out.work.bytes, total);
    return bytes;
  };
  const double injection = 8.0 * nt * (2 * es + es / 8);
  // nz derived (cpu): seven coefficients, 10 per step, 13 per pair.
  const auto tilted = tilted_problem<float>(shape, nt, 31);
  EXPECT_EQ(bytes_of(tilted, TtiDemoForm::fused),
            (std::vector<double>{(cpu ? 10 : 11) * es * points, injection}));
  EXPECT_DOUBLE_EQ(bytes_of(tilted, TtiDemoForm::fused, 2)[0],
                   cpu ? (13.0 + 10.0) / 3 * es * points : 11 * es * points);
  EXPECT_EQ(bytes_of(varying, TtiDemoForm::fused),
            (std::vector<double>{11 * es * points, injection}));
  EXPECT_EQ(bytes_of(constant, TtiDemoForm::fused),
            (std::vector<double>{(cpu ? 3 : 11) * es * points, injection}));
  const std::vector<double> two = bytes_of(varying, TtiDemoForm::fused, 2);  // nt 3: 1 pair + 1
  ASSERT_EQ(two.size(), 2u);
  EXPECT_DOUBLE_EQ(two[0], cpu ? (14.0 + 11.0) / 3 * es * points : 11 * es * points);
  EXPECT_EQ(bytes_of(constant, TtiDemoForm::fused, 2)[0], (cpu ? 3 : 11) * es * points);
  for (const auto* problem : {&varying, &constant})
    EXPECT_EQ(bytes_of(*problem, TtiDemoForm::two_pass),
              (std::vector<double>{(cpu ? 13 : 10) * es * points, 8 * es * points, injection}));
}

// Under a Recording with verification, the call reports its work and sections' timers and
// compares u and u_prev with the reference's rerun (case.hpp's tolerance).
TEST_F(TtiDemoBackend, RecordingVerifiesAgainstReference) {
  const auto p = test::random_tti_problem<float>({14, 15, 16}, 4, 8, 12);
  Recording recording({.verify = true});
  (void)tti_demo<float>(kBackend, p.input(), TtiDemoOptions{});
  ASSERT_EQ(recording.reports().size(), 1u);
  const KernelReport& report = recording.reports()[0];
  EXPECT_EQ(report.kernel, "tti_demo");
  EXPECT_EQ(report.device, kBackend);
  EXPECT_EQ(report.work.points, 14.0 * 15 * 16 * 4);
  ASSERT_TRUE(report.verification.has_value());
  EXPECT_TRUE(report.verification->pass) << report.verification->summary();
  EXPECT_EQ(report.checks.size(), 2u);  // u, u_prev
  EXPECT_NE(report.timers.find("TTISelfAdjointForward/setup"), nullptr) << report.timers.table();
  EXPECT_TRUE(recording.passed());
}

TEST_F(TtiDemoBackend, BadDeviceIndex) {
  if constexpr (!kTestingCuda) GTEST_SKIP() << "a device index means something on cuda only";
  const auto p = test::random_tti_problem<float>({12, 12, 12}, 2, 8, 1);
  EXPECT_THROW(
      (void)tti_demo<float>(Device{Backend::cuda, 999, false}, p.input(), TtiDemoOptions{}), Error);
}

}  // namespace
