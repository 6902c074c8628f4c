// Cancellation (core/cancel.hpp): the process-wide request, tokens and rate-limited callbacks,
// nested scopes; a token set from another thread stops long scalar, scalar_born (and its
// gradient), scalar_gradient (with disk
// storage, which must leave no file), tti and parstack runs within a second, on the reference
// and cpu backends, with Cancelled; and a later call still works.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/stack.hpp"
#include "sciproxy/tti.hpp"
#include "sciproxy/wave.hpp"
#include "stack/problems.hpp"
#include "tti/tti_problems.hpp"
#include "wave/scalar_reference_problems.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sciproxy::Cancelled;
using sciproxy::CancelScope;

// Runs `run` under a token that another thread sets after `delay`; returns the seconds from the
// token's setting to the Cancelled exception (the message goes to `message`). Fails if the run
// ends without it.
double seconds_to_stop(const std::function<void()>& run, std::string& message,
                       std::chrono::milliseconds delay = 300ms) {
  std::atomic<bool> token{false};
  std::atomic<Clock::rep> set_at{0};
  std::thread setter([&] {
    std::this_thread::sleep_for(delay);
    set_at = Clock::now().time_since_epoch().count();
    token = true;
  });
  double seconds = -1;
  {
    const CancelScope scope(&token);
    try {
      run();
      ADD_FAILURE() << "the run ended before it was cancelled";
    } catch (const Cancelled& e) {
      seconds = std::chrono::duration<double>(Clock::now().time_since_epoch() -
                                              Clock::duration(set_at.load()))
                    .count();
      message = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not Cancelled: " << e.what();
    }
  }
  setter.join();
  std::printf("[ stopped  ] %.3f s after the request: %s\n", seconds, message.c_str());
  return seconds;
}

TEST(Cancel, NothingInstalledNeverStops) {
  EXPECT_FALSE(sciproxy::poll_cancellation());
  EXPECT_NO_THROW(sciproxy::throw_if_cancelled("x", 1, 2));
}

TEST(Cancel, ProcessWideRequestStopsUntilCleared) {
  sciproxy::request_cancellation();
  EXPECT_TRUE(sciproxy::cancellation_requested());
  EXPECT_TRUE(sciproxy::poll_cancellation());
  try {
    sciproxy::throw_if_cancelled("scalar", 1234, 100000);
    ADD_FAILURE() << "no exception";
  } catch (const Cancelled& e) {
    EXPECT_EQ(e.code(), sciproxy::ErrorCode::cancelled);
    EXPECT_NE(std::string(e.what()).find("scalar: cancelled at step 1234 of 100000"),
              std::string::npos)
        << e.what();
  }
  sciproxy::clear_cancellation_request();
  EXPECT_FALSE(sciproxy::poll_cancellation());
}

TEST(Cancel, OtherUnitsAreNamed) {
  try {
    sciproxy::throw_cancelled("parstack", 3, 40, "shifts");
  } catch (const sciproxy::Error& e) {  // Cancelled is an Error like the others
    EXPECT_EQ(std::string(e.what()), "parstack: cancelled after 3 of 40 shifts");
  }
}

TEST(Cancel, TokenIsReadAtEveryPollAndOnlyOnItsThread) {
  std::atomic<bool> token{false};
  const CancelScope scope(&token);
  EXPECT_FALSE(sciproxy::poll_cancellation());
  token = true;
  EXPECT_TRUE(sciproxy::poll_cancellation());
  bool elsewhere = true;
  std::thread([&] { elsewhere = sciproxy::poll_cancellation(); }).join();
  EXPECT_FALSE(elsewhere);  // scopes belong to their thread
}

TEST(Cancel, CallbackIsRateLimitedAndSticky) {
  int calls = 0;
  bool stop = false;
  {
    const CancelScope scope(
        [&] {
          ++calls;
          return stop;
        },
        50ms);
    const auto start = Clock::now();
    while (Clock::now() - start < 500ms) EXPECT_FALSE(sciproxy::poll_cancellation());
    // 500 ms at one call per 50 ms at most (the first one interval after the scope opened).
    EXPECT_GE(calls, 5);
    EXPECT_LE(calls, 10);
    std::printf("[ callback ] %d calls in 500 ms of polling\n", calls);
    stop = true;
    std::this_thread::sleep_for(60ms);
    EXPECT_TRUE(sciproxy::poll_cancellation());
    stop = false;
    EXPECT_TRUE(sciproxy::poll_cancellation());  // once it said stop, the scope stays stopped
  }
  EXPECT_FALSE(sciproxy::poll_cancellation());  // gone with its scope
}

TEST(Cancel, ACallbackThatThrowsStops) {
  const CancelScope scope([]() -> bool { throw std::runtime_error("no"); }, 0ms);
  EXPECT_TRUE(sciproxy::poll_cancellation());
}

TEST(Cancel, ScopesNestAndMayEndOutOfOrder) {
  std::atomic<bool> outer_token{false}, inner_token{false};
  auto outer = std::make_unique<CancelScope>(&outer_token);
  auto inner = std::make_unique<CancelScope>(&inner_token);
  outer_token = true;
  EXPECT_TRUE(sciproxy::poll_cancellation());  // the outer scope still counts
  outer.reset();                               // not the newest (the C ABI's may do this)
  EXPECT_FALSE(sciproxy::poll_cancellation());
  inner_token = true;
  EXPECT_TRUE(sciproxy::poll_cancellation());
  inner.reset();
  EXPECT_FALSE(sciproxy::poll_cancellation());
}

// A 2-D scalar problem whose run takes many seconds: a small model, a huge nt.
sciproxy::wave::test_reference::Problem<double> long_scalar_problem(std::int64_t nt,
                                                                    std::int64_t nshots = 1) {
  return sciproxy::wave::test_reference::random_problem(2, {40, 40, 1}, nshots, 1, 1, nt, 0.9, 7);
}

class CancelBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(CancelBackends, ScalarStopsWithinASecond) {
  const auto device = sciproxy::select_device(GetParam());
  for (std::int64_t nshots : {1, 3}) {  // 3 shots on the cpu backend: shots alone and shared
    auto p = long_scalar_problem(std::string(GetParam()) == "reference" ? 200000 : 2000000, nshots);
    sciproxy::wave::ScalarOptions opt;
    std::string message;
    const double s = seconds_to_stop(
        [&] { (void)sciproxy::wave::scalar<double>(device, p.input(), opt); }, message);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 1.0);
    EXPECT_NE(message.find("scalar"), std::string::npos) << message;
    EXPECT_NE(message.find("cancelled at step"), std::string::npos) << message;
  }
  // Nothing was left in a bad state: a short call afterwards runs.
  auto p = long_scalar_problem(20);
  EXPECT_NO_THROW((void)sciproxy::wave::scalar<double>(device, p.input(), {}));
}

TEST_P(CancelBackends, BornAndItsGradientStopWithinASecond) {
  const auto device = sciproxy::select_device(GetParam());
  auto p = long_scalar_problem(std::string(GetParam()) == "reference" ? 100000 : 1000000);
  std::vector<double> scatter(p.v.size(), 10.0);
  sciproxy::wave::ScalarBornInput<double> in;
  in.background = p.input();
  in.scatter = scatter;
  std::string message;
  double s =
      seconds_to_stop([&] { (void)sciproxy::wave::scalar_born<double>(device, in, {}); }, message);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
  EXPECT_NE(message.find("scalar_born"), std::string::npos) << message;
  // The gradient with a sparse storage (every 200 steps), so that it fits in memory.
  auto q = long_scalar_problem(std::string(GetParam()) == "reference" ? 100000 : 400000);
  in.background = q.input();
  sciproxy::wave::ScalarOptions sparse;
  sparse.model_gradient_sampling_interval = 200;
  std::vector<double> grad(static_cast<std::size_t>(q.nshots * q.nreceivers * q.nt), 1.0);
  s = seconds_to_stop(
      [&] { (void)sciproxy::wave::scalar_born_gradient<double>(device, in, sparse, grad); },
      message);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
}

TEST_P(CancelBackends, GradientWithDiskStorageStopsAndLeavesNoFile) {
  const auto device = sciproxy::select_device(GetParam());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sciproxy-test-cancel-" + std::to_string(::getpid()) + "-" + GetParam());
  std::filesystem::create_directories(dir);
  auto p = long_scalar_problem(std::string(GetParam()) == "reference" ? 100000 : 1000000);
  sciproxy::wave::ScalarOptions opt;
  opt.storage = sciproxy::wave::StorageMode::disk;
  opt.storage_directory = dir.string();
  std::vector<double> grad(static_cast<std::size_t>(p.nshots * p.nreceivers * p.nt), 1.0);
  // Stopped after the files exist (the forward pass has started).
  std::string message;
  const double s = seconds_to_stop(
      [&] { (void)sciproxy::wave::scalar_gradient<double>(device, p.input(), opt, grad); }, message,
      500ms);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  // A run that completes stores to disk and leaves nothing either.
  auto small = long_scalar_problem(40);
  std::vector<double> small_grad(static_cast<std::size_t>(small.nt), 1.0);
  (void)sciproxy::wave::scalar_gradient<double>(device, small.input(), opt, small_grad);
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  std::filesystem::remove_all(dir);
}

TEST_P(CancelBackends, TtiStopsWithinASecond) {
  const auto device = sciproxy::select_device(GetParam());
  const std::int64_t nt = std::string(GetParam()) == "reference" ? 20000 : 200000;
  sciproxy::tti::test_problems::TtiProblem<float> p;
  sciproxy::tti::test_problems::random_problem(p, 8, true, nt, 3,
                                               {{24, 24, 24}, {0, 0, 0}, 1, 1, 1});
  std::string message;
  double s = seconds_to_stop([&] { (void)sciproxy::tti::tti_forward<float>(device, p.in, p.opt); },
                             message);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
  EXPECT_NE(message.find("tti"), std::string::npos) << message;
  s = seconds_to_stop([&] { (void)sciproxy::tti::tti_adjoint<float>(device, p.in, p.data, p.opt); },
                      message);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
}

TEST_P(CancelBackends, ParstackStopsWithinASecond) {
  const auto device = sciproxy::select_device(GetParam());
  const bool reference = std::string(GetParam()) == "reference";
  auto p = sciproxy::test::fixed_size_problem<float>(11, 200, reference ? 20000 : 100000,
                                                     reference ? 4000 : 20000, 200);
  sciproxy::stack::ParstackOptions opt;
  opt.method = sciproxy::stack::Method::max;
  std::vector<float> result(static_cast<std::size_t>(p.nshifts));
  std::string message;
  const double s = seconds_to_stop(
      [&] { (void)sciproxy::stack::parstack<float>(device, p.input(), result, opt); }, message);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 1.0);
  EXPECT_NE(message.find("parstack"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(HostBackends, CancelBackends, ::testing::Values("reference", "cpu"));

}  // namespace
