// cpu backend of the TTI workshop demo operator (both forms, two-pass and fused) against the
// reference, on small grids with random materials per point, random initial fields and a source
// at a random non-grid point; space orders 4 to 16, float32 and float64, odd and even step
// counts, and grids larger than a fused tile (y > 32, z > 128) so that tile borders are crossed.
// Tolerance ||cpu - reference|| / ||reference||: 1e-4 (float32: the reference evaluates in
// double and rounds u once per step, the cpu rounds every operation; the difference grows with
// the steps, as for the scalar propagator's final wavefield), 1e-11 (float64). The two cpu forms
// do the same arithmetic per point: 1e-6 / 1e-13 between them (the compiler may contract a*b+c
// differently in the two loops).
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/verify.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti_demo_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;

namespace {

const Device kReference{Backend::reference, 0, false};
const Device kCpu{Backend::cpu, 0, false};

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-4 : 1e-11;
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double tol,
                  const std::string& what) {
  Tolerance t;
  t.rel_l2 = tol;
  const Comparison c = compare<T, T>(std::span<const T>(got), std::span<const T>(want), t);
  EXPECT_TRUE(c.pass) << what << ": " << c.summary();
}

template <class T>
void check(std::array<std::int64_t, 3> shape, std::int64_t nt, int order, unsigned seed,
           bool random_state = true) {
  const auto p = test::random_tti_problem<T>(shape, nt, order, seed, random_state);
  TtiDemoOptions opt;
  opt.space_order = order;
  const auto ref = tti_demo<T>(kReference, p.input(), opt);
  const std::string what = std::string(sizeof(T) == 4 ? "float32" : "float64") + " order " +
                           std::to_string(order) + " nt " + std::to_string(nt);
  std::vector<T> two_pass_u;
  for (TtiDemoForm form : {TtiDemoForm::two_pass, TtiDemoForm::fused}) {
    opt.form = form;
    Timers timers;
    const auto out = tti_demo<T>(kCpu, p.input(), opt, &timers);
    const std::string w = what + " " + tti_demo_form_name(form);
    expect_close(out.u, ref.u, tolerance<T>(), w + " u");
    expect_close(out.u_prev, ref.u_prev, tolerance<T>(), w + " u_prev");
    if (form == TtiDemoForm::two_pass) {
      two_pass_u = out.u;
      ASSERT_EQ(out.sections.size(), 3u);
      EXPECT_EQ(out.sections[0].name, "flux pass");
      EXPECT_GT(out.sections[0].seconds, 0.0);
    } else {
      expect_close(out.u, two_pass_u, sizeof(T) == 4 ? 1e-6 : 1e-13, w + " vs two-pass");
      ASSERT_EQ(out.sections.size(), 2u);
      EXPECT_EQ(out.sections[0].name, "fused flux + divergence");
    }
    EXPECT_EQ(out.work.points, static_cast<double>(shape[0] * shape[1] * shape[2] * nt));
  }
}

}  // namespace

TEST(TtiDemoCpu, MatchesReferenceFloat64AllOrders) {
  for (int order : {4, 8, 12, 16}) check<double>({17, 19, 21}, 7, order, 40 + order);
}

TEST(TtiDemoCpu, MatchesReferenceFloat32AllOrders) {
  for (int order : {4, 8, 12, 16}) check<float>({16, 18, 20}, 8, order, 60 + order);
}

TEST(TtiDemoCpu, CrossesFusedTileBorders) {
  check<float>({12, 70, 150}, 5, 8, 3);
  check<double>({16, 40, 140}, 4, 16, 4, false);  // from rest: the source and the boundary term
}

TEST(TtiDemoCpu, DemoMaterialsFromRest) {
  // The CLI demo's constant materials: the field comes from the source and the edges only.
  const auto p = test::constant_tti_problem<float>({24, 20, 30}, 30);
  const auto ref = tti_demo<float>(kReference, p.input(), TtiDemoOptions{});
  for (TtiDemoForm form : {TtiDemoForm::two_pass, TtiDemoForm::fused}) {
    TtiDemoOptions opt;
    opt.form = form;
    expect_close(tti_demo<float>(kCpu, p.input(), opt).u, ref.u, 1e-4, tti_demo_form_name(form));
  }
}

TEST(TtiDemoCpu, ThreadCountDoesNotChangeTheResult) {
  const auto p = test::random_tti_problem<double>({10, 40, 30}, 3, 8, 9);
  TtiDemoOptions one, two;
  one.nparallel = 1;
  two.nparallel = 2;
  EXPECT_EQ(tti_demo<double>(kCpu, p.input(), one).u, tti_demo<double>(kCpu, p.input(), two).u);
}
