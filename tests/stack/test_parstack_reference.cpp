// parstack reference backend against hand-computed cases, and the checks of bad input.
// Expected values were worked out by hand (and agree with pyrocko's parstack on the same input).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/stack.hpp"

using namespace sciproxy;
using namespace sciproxy::stack;

namespace {

const Device kReference{Backend::reference, 0, false};

struct Case {
  std::vector<std::vector<double>> data;
  std::vector<std::int32_t> offsets, shifts;
  std::vector<double> weights;
  std::int64_t nshifts;
  std::vector<std::span<const double>> spans;

  ParstackInput<double> input() {
    spans.assign(data.begin(), data.end());
    return {spans, offsets, shifts, weights, nshifts};
  }
};

// Two traces, two shift sets: the example of docs/kernels/parstack.md's semantics.
Case two_traces() {
  return {{{1, 2, 3}, {-1, -2, -3}}, {0, 1}, {0, 0, 1, -1}, {1, 1, 1, 1}, 2, {}};
}

std::vector<double> run(Case& c, const ParstackOptions& opt, Extent* extent = nullptr,
                        std::vector<double> result = {}) {
  auto in = c.input();
  const Extent e = parstack_extent(in, opt);
  if (result.empty()) result.assign(parstack_result_size(c.nshifts, e, opt.method), -99.0);
  const Extent got = parstack<double>(kReference, in, result, opt);
  if (extent) *extent = got;
  return result;
}

}  // namespace

TEST(ParstackReference, DefaultWindow) {
  Case c = two_traces();
  Extent e;
  // Shift set 0: trace 0 at 0..2, trace 1 at 1..3.  Shift set 1: trace 0 at 1..3, trace 1 at 0..2.
  EXPECT_EQ(run(c, {}, &e), (std::vector<double>{1, 1, 1, -3, -1, -1, -1, 3}));
  EXPECT_EQ(e.offsetout, 0);
  EXPECT_EQ(e.lengthout, 4);
}

TEST(ParstackReference, GivenWindowWithNegativeOffsetout) {
  Case c = two_traces();
  ParstackOptions opt;
  opt.lengthout = 3;
  opt.offsetout = -1;
  Extent e;
  EXPECT_EQ(run(c, opt, &e), (std::vector<double>{0, 1, 1, 0, -1, -1}));
  EXPECT_EQ(e.offsetout, -1);
  EXPECT_EQ(e.lengthout, 3);
}

TEST(ParstackReference, NegativeOffsetsAndShiftsAndWeights) {
  // Trace a = [1, 2] at offset -3 shifted by -1 starts at -4; trace b = [10] at 2 shifted by -2 at
  // 0.
  Case c{{{1, 2}, {10}}, {-3, 2}, {-1, -2}, {2, -0.5}, 1, {}};
  Extent e;
  EXPECT_EQ(run(c, {}, &e), (std::vector<double>{2, 4, 0, 0, -5}));
  EXPECT_EQ(e.offsetout, -4);
  EXPECT_EQ(e.lengthout, 5);
}

TEST(ParstackReference, TracesOutsideTheWindowContributeNothing) {
  Case c{{{1, 2, 3}, {5, 5}}, {0, 100}, {0, 0}, {1, 1}, 1, {}};
  ParstackOptions opt;
  opt.lengthout = 4;
  opt.offsetout = -1;
  EXPECT_EQ(run(c, opt), (std::vector<double>{0, 1, 2, 3}));
  opt.offsetout = 2;  // only the last sample of trace 0 is inside
  EXPECT_EQ(run(c, opt), (std::vector<double>{3, 0, 0, 0}));
}

TEST(ParstackReference, ZeroWeightsSkipTheirTrace) {
  Case c = two_traces();
  c.weights = {0, 1, 1, 0};
  EXPECT_EQ(run(c, {}), (std::vector<double>{0, -1, -2, -3, 0, 1, 2, 3}));
}

TEST(ParstackReference, AccumulatesIntoTheResult) {
  Case c = two_traces();
  ParstackOptions opt;
  opt.accumulate = true;
  std::vector<double> r(8, 0.0);
  r = run(c, opt, nullptr, r);
  r = run(c, opt, nullptr, r);
  EXPECT_EQ(r, (std::vector<double>{2, 2, 2, -6, -2, -2, -2, 6}));
  opt.accumulate = false;  // without accumulate the result is overwritten
  EXPECT_EQ(run(c, opt, nullptr, r), (std::vector<double>{1, 1, 1, -3, -1, -1, -1, 3}));
}

TEST(ParstackReference, MethodOneTrueMaximumAndPyrockoClamp) {
  Case c{{{-1, -2}}, {0}, {0}, {1}, 1, {}};
  ParstackOptions opt;
  opt.method = Method::max;
  EXPECT_EQ(run(c, opt), (std::vector<double>{-1}));
  opt.clamp_max_at_zero = true;
  EXPECT_EQ(run(c, opt), (std::vector<double>{0}));
  Case d = two_traces();
  opt.clamp_max_at_zero = false;
  opt.lengthout = 3;
  opt.offsetout = -1;
  EXPECT_EQ(run(d, opt), (std::vector<double>{1, 0}));
}

TEST(ParstackReference, ArgmaxFirstMaximumAndPyrockoQuirk) {
  const std::vector<double> a{-1, 2, 5, -0.5, 3, 5};  // 2 x 3
  std::vector<std::uint32_t> out(3);
  argmax<double>(a, 2, 3, out);
  EXPECT_EQ(out, (std::vector<std::uint32_t>{1, 1, 0}));  // ties: the first wins
  argmax<double>(a, 2, 3, out, 0, true);
  EXPECT_EQ(out, (std::vector<std::uint32_t>{0, 1, 0}));  // all <= 0 gives 0 in pyrocko
}

TEST(ParstackReference, MaximumOverAWindowWiderThanTheTraces) {
  // Samples no trace covers stack to 0: a window wider than the traces puts 0 in the maximum,
  // whatever its width (the library runs the kernel on the covered part only).
  Case c{{{-1, -2, -3}, {-1, -2, -3}}, {0, 1}, {0, 0, 1, -1}, {1, 1, 1, 2}, 2, {}};
  ParstackOptions opt;
  opt.method = Method::max;
  EXPECT_EQ(run(c, opt), (std::vector<double>{-1, -2}));  // the default window: all covered
  for (const std::int64_t length : {std::int64_t(20), std::int64_t(1) << 40}) {
    opt.offsetout = -5;
    opt.lengthout = length;
    EXPECT_EQ(run(c, opt), (std::vector<double>{0, 0})) << length;
    // The oracle: method 0 over a window that holds the traces and some uncovered samples.
    ParstackOptions stack;
    stack.offsetout = -5;
    stack.lengthout = 20;
    const std::vector<double> r = run(c, stack);
    for (std::int64_t s = 0; s < 2; ++s)
      EXPECT_EQ(*std::max_element(r.begin() + 20 * s, r.begin() + 20 * (s + 1)), 0.0);
  }
  // A window that no trace reaches: every stack is 0.
  opt.offsetout = 1000;
  opt.lengthout = std::int64_t(1) << 40;
  EXPECT_EQ(run(c, opt), (std::vector<double>{0, 0}));
  // Partly covered windows, against method 0 (whose maximum needs no narrowing).
  Case d = two_traces();
  for (std::int32_t first : {-3, 0, 2}) {
    opt.offsetout = first;
    opt.lengthout = 9;
    ParstackOptions stack;
    stack.offsetout = first;
    stack.lengthout = 9;
    const std::vector<double> r = run(d, stack), m = run(d, opt);
    for (std::int64_t s = 0; s < 2; ++s)
      EXPECT_EQ(m[s], *std::max_element(r.begin() + 9 * s, r.begin() + 9 * (s + 1))) << first;
  }
}

TEST(ParstackReference, ArgmaxNanLikeNumpy) {
  // Columns (3 x 6): NaN last, NaN first, all NaN, inf then NaN, -inf only, NaN between maxima.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> a{1,   nan, nan, inf, -inf, 2,    //
                              2,   3,   nan, nan, -inf, nan,  //
                              nan, 5,   nan, 1,   -inf, 2};
  std::vector<std::uint32_t> out(6);
  argmax<double>(a, 3, 6, out);  // numpy.argmax(a, axis=0): the first NaN wins
  EXPECT_EQ(out, (std::vector<std::uint32_t>{2, 0, 0, 1, 0, 1}));
  argmax<double>(a, 3, 6, out, 0, true);  // pyrocko: NaN never wins, the maximum from DBL_MIN
  EXPECT_EQ(out, (std::vector<std::uint32_t>{1, 2, 0, 0, 0, 0}));
}

// ---- bad input -----------------------------------------------------------------------------

namespace {
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(ParstackReference, BadInputIsAClearError) {
  auto expect = [](Case c, ParstackOptions opt, const std::string& argument) {
    const std::string message = error_of([&] { run(c, opt); });
    EXPECT_EQ(message.rfind(argument + ": expected", 0), 0u) << argument << " -> " << message;
  };
  Case c = two_traces();
  c.offsets = {0};
  expect(c, {}, "offsets");
  c = two_traces();
  c.shifts.pop_back();
  expect(c, {}, "shifts");
  c = two_traces();
  c.weights.push_back(1);
  expect(c, {}, "weights");
  c = two_traces();
  c.weights[2] = std::numeric_limits<double>::quiet_NaN();
  expect(c, {}, "weights");
  c = two_traces();
  c.data[1][1] = std::numeric_limits<double>::infinity();
  expect(c, {}, "traces[1]");
  c = two_traces();
  ParstackOptions opt;
  opt.lengthout = 0;
  expect(c, opt, "lengthout");
  opt = {};
  opt.method = static_cast<Method>(3);
  expect(c, opt, "method");
  c = two_traces();
  c.data = {{}, {}};  // empty traces at one start: the default window would be empty
  c.offsets = {0, 0};
  c.shifts = {0, 0, 0, 0};
  expect(c, {}, "traces");
  c = two_traces();
  c.nshifts = 0;
  c.shifts.clear();
  c.weights.clear();
  expect(c, {}, "shifts");

  Case d = two_traces();
  std::vector<double> wrong(7);
  const std::string m = error_of([&] { parstack<double>(kReference, d.input(), wrong); });
  EXPECT_EQ(m, "result: expected nshifts x lengthout = 2 x 4 = 8 elements, got 7 elements");
}

// The scan for non-finite samples is a vectorised sum: every position of a long trace (the
// vector body and the scalar tail), every kind of non-finite value, both dtypes; the largest
// finite values pass.
template <class T>
void expect_nonfinite_refused() {
  const std::size_t length = 1003;  // not a multiple of any vector width: a scalar tail
  std::vector<std::vector<T>> data(3, std::vector<T>(length, T(0.5)));
  data[1][length / 2] = std::numeric_limits<T>::max();
  data[2][0] = -std::numeric_limits<T>::max();
  const std::vector<std::int32_t> offsets{0, 0, 0}, shifts{0, 1, 2};
  const std::vector<T> weights{1, 1, 1};
  auto window = [&] {
    std::vector<std::span<const T>> spans(data.begin(), data.end());
    return parstack_extent(ParstackInput<T>{spans, offsets, shifts, weights, 1}, {});
  };
  EXPECT_EQ(window().lengthout, static_cast<std::int64_t>(length) + 2);
  for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity()})
    for (const std::size_t at : {std::size_t(0), std::size_t(517), length - 1}) {
      const T kept = data[2][at];
      data[2][at] = bad;
      const std::string message = error_of([&] { window(); });
      EXPECT_EQ(message.rfind("traces[2]: expected finite samples", 0), 0u) << message;
      EXPECT_NE(message.find("at index " + std::to_string(at)), std::string::npos) << message;
      // SampleCheck::skip sizes the result without the scan; parstack itself still refuses.
      std::vector<std::span<const T>> spans(data.begin(), data.end());
      const ParstackInput<T> in{spans, offsets, shifts, weights, 1};
      const Extent sized = parstack_extent(in, {}, SampleCheck::skip);
      EXPECT_EQ(sized.lengthout, static_cast<std::int64_t>(length) + 2);
      std::vector<T> result(static_cast<std::size_t>(sized.lengthout), T(7));
      const std::string refused = error_of([&] {
        parstack<T>(Device{Backend::cpu, 0, false}, in, std::span<T>(result), {});
      });
      EXPECT_EQ(refused.rfind("traces[2]: expected finite samples", 0), 0u) << refused;
      EXPECT_EQ(result, std::vector<T>(result.size(), T(7))) << "nothing written";
      data[2][at] = kept;
    }
}

TEST(ParstackReference, NonFiniteSamplesAnywhereAreRefused) {
  expect_nonfinite_refused<float>();
  expect_nonfinite_refused<double>();
}
