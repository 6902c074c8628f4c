// The recording hook of the wave family's entry points (core/recorded_call.hpp) on the backend
// under test (tests/common/backend_test.hpp): inside a Recording every call of scalar,
// scalar_gradient, scalar_born and scalar_born_gradient appends one report naming the kernel, the
// device, its work model and its timer table; with RecordingOptions{verify = true} it reruns
// itself on the reference and records a passing comparison of each output (by the Python API's
// names, with src/wave/case.hpp's tolerances); outside a Recording nothing is recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "scalar_born_problems.hpp"
#include "sciproxy/core/recording.hpp"
#include "sciproxy/wave.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace born_test;
using test::kBackend;

namespace {

class WaveRecording : public test::BackendTest {
 protected:
  // A small 2-D problem with a background receiver.
  BornProblem<double> problem_ = random_born(2, {14, 18, 1}, 2, 1, 3, 2, 12, 0.9, 5);
  ScalarOptions options() const {
    ScalarOptions opt;
    opt.accuracy = 4;
    opt.pml_width = {4, 4, 4, 4, 0, 0};
    opt.pml_freq = 25;
    return opt;
  }
  std::vector<double> residual() const {
    return random_vector<double>(
        static_cast<std::size_t>(problem_.nshots * problem_.nreceivers * problem_.nt), 6);
  }
  std::vector<double> bg_residual() const {
    return random_vector<double>(
        static_cast<std::size_t>(problem_.nshots * problem_.nbg * problem_.nt), 7);
  }
  // Runs each entry point once.
  void call_each() const {
    const ScalarOptions opt = options();
    const auto d = residual(), d_bg = bg_residual();
    (void)scalar<double>(kBackend, problem_.input(), opt);
    (void)scalar_gradient<double>(kBackend, problem_.input(), opt, d);
    (void)scalar_born<double>(kBackend, problem_.born(), opt);
    (void)scalar_born_gradient<double>(kBackend, problem_.born(), opt, d, d_bg, true);
  }
};

bool has_check(const KernelReport& r, const std::string& output) {
  return std::any_of(r.checks.begin(), r.checks.end(),
                     [&](const Comparison& c) { return c.output == output; });
}

}  // namespace

TEST_F(WaveRecording, OneReportPerCallWithDeviceWorkAndTimers) {
  Recording recording;
  call_each();
  const auto& reports = recording.reports();
  ASSERT_EQ(reports.size(), 4u) << recording.text();
  const char* kernels[] = {"scalar", "scalar_gradient", "scalar_born", "scalar_born_gradient"};
  for (std::size_t k = 0; k < reports.size(); ++k) {
    const KernelReport& r = reports[k];
    EXPECT_EQ(r.kernel, kernels[k]);
    EXPECT_EQ(r.device, kBackend) << r.kernel;
    EXPECT_GT(r.work.points, 0) << r.kernel;
    EXPECT_GT(r.work.flops, 0) << r.kernel;
    EXPECT_GT(r.work.bytes, 0) << r.kernel;
    EXPECT_EQ(r.work.precision, Precision::fp64) << r.kernel;
    EXPECT_GT(r.seconds, 0) << r.kernel;
    EXPECT_FALSE(r.parameters.empty()) << r.kernel;
    EXPECT_FALSE(r.verification.has_value()) << r.kernel << ": verified without being asked";
  }
  EXPECT_NE(reports[0].timers.find("scalar/forward"), nullptr) << reports[0].timers.table();
  EXPECT_NE(reports[1].timers.find("scalar/backward"), nullptr) << reports[1].timers.table();
  EXPECT_NE(reports[2].timers.find("scalar_born/forward"), nullptr) << reports[2].timers.table();
  EXPECT_NE(reports[3].timers.find("scalar_born_gradient/born_backward"), nullptr)
      << reports[3].timers.table();
  // The gradient's work: its forward pass and the adjoint.
  EXPECT_DOUBLE_EQ(reports[1].work.points, 2 * reports[0].work.points);
  EXPECT_TRUE(recording.passed());
}

TEST_F(WaveRecording, VerificationAgainstTheReferencePasses) {
  Recording recording(RecordingOptions{true});
  call_each();
  const auto& reports = recording.reports();
  ASSERT_EQ(reports.size(), 4u) << recording.text();  // the reference reruns are not recorded
  for (const KernelReport& r : reports) {
    EXPECT_EQ(r.device, kBackend) << r.kernel;
    if (kBackend.backend == Backend::reference) continue;
    ASSERT_TRUE(r.verification.has_value()) << r.kernel;
    EXPECT_TRUE(r.passed()) << recording.text();
  }
  EXPECT_TRUE(recording.passed()) << recording.text();
  EXPECT_TRUE(has_check(reports[0], "receiver_amplitudes"));
  EXPECT_TRUE(has_check(reports[0], "wavefield_0"));
  EXPECT_TRUE(has_check(reports[0], "psiy_m1"));
  EXPECT_TRUE(has_check(reports[0], "zetax_m1"));
  EXPECT_TRUE(has_check(reports[1], "grad_v"));
  EXPECT_TRUE(has_check(reports[1], "grad_source_amplitudes"));
  EXPECT_TRUE(has_check(reports[1], "grad_initial_state['wavefield_0']"));
  EXPECT_TRUE(has_check(reports[2], "bg_receiver_amplitudes"));
  EXPECT_TRUE(has_check(reports[2], "wavefield_sc_m1"));
  EXPECT_TRUE(has_check(reports[2], "psix_sc_m1"));
  EXPECT_TRUE(has_check(reports[3], "grad_scatter"));
  EXPECT_TRUE(has_check(reports[3], "grad_source_amplitudes"));
}

TEST_F(WaveRecording, NothingIsRecordedOutsideARecording) {
  std::size_t inside = 0;
  {
    Recording recording;
    (void)scalar<double>(kBackend, problem_.input(), options());
    inside = recording.reports().size();
  }
  EXPECT_EQ(inside, 1u);
  ASSERT_EQ(Recording::active(), nullptr);
  call_each();  // no Recording alive: nothing to append to
  Recording later;
  EXPECT_TRUE(later.reports().empty());
  // A caller's timers still get the call's regions without a Recording.
  Timers timers;
  (void)scalar<double>(kBackend, problem_.input(), options(), nullptr, &timers);
  EXPECT_NE(timers.find("scalar/forward"), nullptr) << timers.table();
  EXPECT_EQ(later.reports().size(), 1u);  // `later` is alive: that call was recorded
  // The caller's timers get the regions, and the report shows them too (its timer table is
  // never empty because the caller listened).
  EXPECT_NE(later.reports()[0].timers.find("scalar/forward"), nullptr)
      << later.reports()[0].timers.table();
}
