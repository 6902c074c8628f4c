// cuda backend of the TTI workshop demo operator, both forms (two-pass and fused), against the
// cpu backend's two-pass form on small grids with random materials and initial fields (orders 4
// to 16, float32 and float64, grids that cross the fused kernel's tiles), and the two cuda forms
// against each other; a bad device index. Every test skips without a GPU.
// Tolerance ||cuda - cpu|| / ||cpu||: 1e-5 (float32; the same per-point arithmetic, demo_math.hpp,
// in another summation order only where nvcc contracts differently), 1e-12 (float64).
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti_demo_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;

namespace {

class TtiDemoCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

const Device kCpu{Backend::cpu, 0, false};
const Device kCuda{Backend::cuda, 0, false};

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  Tolerance t;
  t.rel_l2 = sizeof(T) == 4 ? 1e-5 : 1e-12;
  const Comparison c = compare<T, T>(std::span<const T>(got), std::span<const T>(want), t);
  EXPECT_TRUE(c.pass) << what << ": " << c.summary();
}

template <class T>
void check(std::array<std::int64_t, 3> shape, std::int64_t nt, int order, unsigned seed) {
  const auto p = test::random_tti_problem<T>(shape, nt, order, seed, true);
  TtiDemoOptions opt;
  opt.space_order = order;
  opt.form = TtiDemoForm::two_pass;
  const auto cpu = tti_demo<T>(kCpu, p.input(), opt);
  std::vector<T> two_pass;
  for (TtiDemoForm form : {TtiDemoForm::two_pass, TtiDemoForm::fused}) {
    opt.form = form;
    Timers timers;
    const auto out = tti_demo<T>(kCuda, p.input(), opt, &timers);
    const std::string what = std::string(sizeof(T) == 4 ? "float32" : "float64") + " order " +
                             std::to_string(order) + " " + tti_demo_form_name(form);
    expect_close(out.u, cpu.u, what + " u");
    expect_close(out.u_prev, cpu.u_prev, what + " u_prev");
    EXPECT_GT(out.sections.front().seconds, 0.0) << what << ": no CUDA-event time recorded";
    if (form == TtiDemoForm::two_pass) two_pass = out.u;
    else expect_close(out.u, two_pass, what + " vs cuda two-pass");
  }
}

}  // namespace

TEST_F(TtiDemoCuda, MatchesCpuAllOrders) {
  for (int order : {4, 8, 12, 16}) {
    check<float>({17, 19, 45}, 7, order, 10 + order);
    check<double>({13, 21, 37}, 6, order, 20 + order);
  }
}

TEST_F(TtiDemoCuda, LargerGridCrossesTiles) {
  check<float>({40, 70, 150}, 12, 8, 5);
  check<float>({33, 50, 97}, 9, 16, 6);
}

TEST_F(TtiDemoCuda, BadDeviceIndex) {
  const auto p = test::random_tti_problem<float>({12, 12, 12}, 2, 8, 1);
  EXPECT_THROW((void)tti_demo<float>(Device{Backend::cuda, 999, false}, p.input(), TtiDemoOptions{}),
               Error);
}
