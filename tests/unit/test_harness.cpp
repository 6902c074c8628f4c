// The harness (run_case over a registry entry), the parameters of a report, and recordings of
// calls: what every family's case and entry point relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/json.hpp"
#include "core/recorded_call.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/recording.hpp"

using namespace sciproxy;

namespace {

// y[i] = scale * x[i]; the reference computes it exactly, the cpu backend with an error `bias`
// that the settings choose, so a test can make a device disagree.
class ScaleCase final : public Case {
 public:
  explicit ScaleCase(const CaseSettings& s)
      : n_(s.get_int("n", 100)), bias_(s.get_real("bias", 0)), x_(n_), y_(n_) {
    s.check_known({"n", "bias"});
    for (long long i = 0; i < n_; ++i) x_[i] = 1.0 + static_cast<double>(i);
  }
  std::string kernel() const override { return "scale"; }
  std::string label() const override { return std::to_string(n_) + " values"; }
  Parameters parameters() const override {
    Parameters p;
    p.set("n", n_);
    return p;
  }
  WorkModel work() const override {
    WorkModel w;
    w.points = static_cast<double>(n_);
    w.flops = static_cast<double>(n_);
    w.bytes = 16.0 * static_cast<double>(n_);
    return w;
  }
  double run(const Device& device, Timers* timers) override {
    auto region = Timers::region(timers, "scale");
    ++runs;
    const double error = device.backend == Backend::reference ? 0 : bias_;
    for (long long i = 0; i < n_; ++i) y_[i] = 3 * x_[i] * (1 + error);
    return 0;
  }
  std::vector<CaseOutput> outputs() const override { return {{"y", std::span<const double>(y_)}}; }
  Tolerance tolerance(const std::string&) const override { return Tolerance{1e-12}; }
  int runs = 0;

 private:
  long long n_;
  double bias_;
  std::vector<double> x_, y_;
};

CaseEntry scale_entry() {
  return {"scale",
          "test",
          "y = 3 x",
          [](const CaseSettings& s) { return std::make_unique<ScaleCase>(s); },
          {CaseSettings{}}};
}

const Device kCpu{Backend::cpu, 0, false};

}  // namespace

TEST(Harness, RunsRepetitionsAndVerifiesAgainstTheReference) {
  HarnessOptions opt;
  opt.warmup = 2;
  opt.repetitions = 3;
  opt.measure_roofline = false;
  const auto results = run_case(scale_entry(), CaseSettings{}, {kCpu}, opt);
  ASSERT_EQ(results.size(), 1u);
  const KernelReport& r = results[0].report;
  EXPECT_EQ(r.kernel, "scale");
  EXPECT_EQ(r.device, kCpu);
  EXPECT_EQ(results[0].stats.seconds.size(), 3u);
  ASSERT_TRUE(r.verification.has_value());
  EXPECT_TRUE(r.verification->pass) << r.verification->summary();
  EXPECT_EQ(r.verification->output, "y");
  EXPECT_DOUBLE_EQ(r.work.points, 100);
  EXPECT_GT(r.rates.gpoints_per_s, 0);
  // The timer table holds the timed calls only (the warm-up calls are cleared).
  ASSERT_NE(r.timers.find("scale"), nullptr);
  EXPECT_EQ(r.timers.find("scale")->calls, 3);
  const auto j = nlohmann::json::parse(case_result_json(results[0]));
  EXPECT_EQ(j.at("kernel"), "scale");
  EXPECT_EQ(j.at("bench").at("repetitions"), 3);
  EXPECT_EQ(j.at("verification").at("pass"), true);
}

TEST(Harness, ADeviceThatDisagreesFails) {
  HarnessOptions opt;
  opt.repetitions = 1;
  opt.measure_roofline = false;
  CaseSettings wrong{{{"bias", "1e-6"}}};
  const auto results = run_case(scale_entry(), wrong, {kCpu}, opt);
  ASSERT_TRUE(results[0].report.verification.has_value());
  EXPECT_FALSE(results[0].report.passed());
  EXPECT_NEAR(results[0].report.verification->rel_l2, 1e-6, 1e-9);
}

TEST(Harness, NanNeverPasses) {
  HarnessOptions opt;
  opt.repetitions = 1;
  opt.measure_roofline = false;
  CaseSettings nan{{{"bias", "nan"}}};
  EXPECT_THROW(run_case(scale_entry(), nan, {kCpu}, opt), InvalidArgument);  // not a finite number
  CaseSettings inf{{{"bias", "1e308"}}};  // overflows to inf in the device's output
  const auto results = run_case(scale_entry(), inf, {kCpu}, opt);
  EXPECT_FALSE(results[0].report.passed());
}

TEST(Harness, SettingsAreCheckedByName) {
  EXPECT_THROW(ScaleCase(CaseSettings{{{"n", "ten"}}}), InvalidArgument);
  try {
    ScaleCase(CaseSettings{{{"nn", "10"}}});
    FAIL() << "a misspelt setting was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("nn"), std::string::npos) << e.what();
  }
  HarnessOptions opt;
  opt.repetitions = 0;
  EXPECT_THROW(run_case(scale_entry(), CaseSettings{}, {kCpu}, opt), InvalidArgument);
}

TEST(Harness, TheRegistryHoldsEveryFamily) {
  std::vector<std::string> families;
  for (const auto& e : case_registry()) {
    EXPECT_FALSE(e.demo_variants.empty()) << e.name;
    families.push_back(e.family);
  }
  for (const char* f : {"stack", "wave", "tti"})
    EXPECT_NE(std::find(families.begin(), families.end(), f), families.end()) << f;
  EXPECT_EQ(find_case("parstack").family, "stack");
  try {
    find_case("frobnicate");
    FAIL() << "an unknown case was found";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("parstack"), std::string::npos) << e.what();
  }
}

// Every case states its tolerances without being made, and they are the ones its instances
// use: a float32 bound is positive and no tighter than the float64 one.
TEST(Harness, EveryCaseStatesItsTolerances) {
  for (const auto& e : case_registry()) {
    ASSERT_TRUE(static_cast<bool>(e.tolerance)) << e.name;
    const Tolerance f32 = case_tolerance(e.name, CaseSettings{{{"dtype", "float32"}}}, "");
    const Tolerance f64 = case_tolerance(e.name, CaseSettings{{{"dtype", "float64"}}}, "");
    EXPECT_GT(f32.rel_l2, 0) << e.name;
    EXPECT_GT(f64.rel_l2, 0) << e.name;
    EXPECT_GE(f32.rel_l2, f64.rel_l2) << e.name;
  }
  EXPECT_EQ(case_tolerance("parstack", CaseSettings{{{"dtype", "float32"}}}, "").rel_l2, 1e-5);
  EXPECT_EQ(case_tolerance("scalar_born", CaseSettings{{{"dtype", "float32"}}}, "").rel_l2, 1e-4);
  const CaseSettings compressed{{{"dtype", "float32"}, {"storage_compression", "1"}}};
  EXPECT_EQ(case_tolerance("scalar_gradient", compressed, "grad_v").rel_l2, 1e-2);
  EXPECT_EQ(case_tolerance("scalar_gradient", compressed, "receiver_amplitudes").rel_l2, 1e-5);
  EXPECT_THROW(case_tolerance("frobnicate", CaseSettings{}, ""), InvalidArgument);
}

TEST(Parameters, KeepTheirOrderAndLastValue) {
  Parameters p;
  p.set("nt", 100);
  p.set("dtype", "float32");
  p.set("shape", std::vector<long long>{3, 4});
  p.set("nt", 200);
  ASSERT_EQ(p.entries().size(), 3u);
  EXPECT_EQ(p.entries()[0].first, "nt");
  EXPECT_EQ(p.json(), R"({"dtype":"float32","nt":200,"shape":[3,4]})");
  EXPECT_EQ(to_json(parameters_from_json(to_json(p))), to_json(p));
}

namespace {
// An entry point as the families write them: y = 2 x, recorded, verifiable.
std::vector<double> doubled(const Device& device, const std::vector<double>& x, double bias = 0) {
  RecordedCall call("doubled", device, nullptr);
  std::vector<double> y(x.size());
  {
    auto region = Timers::region(call.timers(), "doubled");
    const double e = device.backend == Backend::reference ? 0 : bias;
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = 2 * x[i] * (1 + e);
  }
  WorkModel w;
  w.points = static_cast<double>(x.size());
  call.set_work(w);
  if (call.verifying()) {
    const auto expected =
        call.on_reference([&] { return doubled(RecordedCall::reference_device(), x); });
    call.compare<double>("y", y, expected, Tolerance{1e-12});
  }
  return y;
}
}  // namespace

TEST(Recording, CollectsTheReportOfEveryCallWhileAlive) {
  const std::vector<double> x = {1, 2, 3};
  doubled(kCpu, x);  // before: not recorded
  Recording rec;
  EXPECT_EQ(Recording::active(), &rec);
  doubled(kCpu, x);
  ASSERT_EQ(rec.reports().size(), 1u);
  const KernelReport& r = rec.reports()[0];
  EXPECT_EQ(r.kernel, "doubled");
  EXPECT_EQ(r.device, kCpu);
  EXPECT_DOUBLE_EQ(r.work.points, 3);
  EXPECT_NE(r.timers.find("doubled"), nullptr);
  EXPECT_FALSE(r.verification.has_value());  // not asked for
  EXPECT_TRUE(rec.passed());
  const auto j = nlohmann::json::parse(rec.json());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].at("kernel"), "doubled");
  EXPECT_NE(rec.text().find("Operator doubled"), std::string::npos);
}

TEST(Recording, VerifiesEachCallAgainstTheReferenceWhenAsked) {
  const std::vector<double> x = {1, 2, 3};
  Recording rec(RecordingOptions{true});
  doubled(kCpu, x);
  doubled(kCpu, x, 1e-3);
  // The reference reruns are not recorded as calls of their own.
  ASSERT_EQ(rec.reports().size(), 2u);
  ASSERT_TRUE(rec.reports()[0].verification.has_value());
  EXPECT_TRUE(rec.reports()[0].verification->pass);
  EXPECT_FALSE(rec.reports()[1].verification->pass);
  EXPECT_FALSE(rec.passed());
}

TEST(Recording, NestsAndEndsWithItsScope) {
  const std::vector<double> x = {1};
  Recording outer;
  {
    Recording inner;
    doubled(kCpu, x);
    EXPECT_EQ(inner.reports().size(), 1u);
  }
  EXPECT_EQ(Recording::active(), &outer);
  doubled(kCpu, x);
  EXPECT_EQ(outer.reports().size(), 1u);
}

TEST(Recording, ACallersTimersReachTheReport) {
  Recording rec;
  Timers mine;
  {
    RecordedCall call("timed", kCpu, &mine);
    EXPECT_EQ(call.timers(), &mine);
    auto region = Timers::region(call.timers(), "work");
  }
  ASSERT_EQ(rec.reports().size(), 1u);
  EXPECT_NE(rec.reports()[0].timers.find("work"), nullptr);
  EXPECT_NE(mine.find("work"), nullptr);
}

TEST(Recording, AFailedCallLeavesNoReport) {
  Recording rec;
  try {
    RecordedCall call("fails", kCpu, nullptr);
    throw InvalidArgument("x: expected something, got nothing");
  } catch (const InvalidArgument&) {
  }
  EXPECT_TRUE(rec.reports().empty());
}
