// Scalar propagator, reference backend: what the API promises around the numbers: storage
// modes of the gradient, source scaling and receiver timing, continuation, CFL and resampling,
// the work model and timers, and the checks of bad input (every one names its argument).
// The numbers themselves: test_scalar_reference.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
// Storage modes

class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("sciproxy-test-scalar-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::filesystem::path path_;
};

struct StorageFixture {
  Problem<double> p = random_problem(2, {14, 12, 1}, 2, 2, 3, 25, 0.9, 9);
  ScalarOptions opt;
  std::vector<double> y = random_vector(static_cast<std::size_t>(2 * 3 * 25), 10);
  ScalarGradient<double> run(StorageMode mode, bool compression = false,
                             const std::string& dir = ".") {
    ScalarOptions o = opt;
    o.storage = mode;
    o.storage_compression = compression;
    o.storage_directory = dir;
    return scalar_gradient(kReference, p.input(), o, std::span<const double>(y));
  }
};

TEST(ScalarStorage, HostAndDiskEqualDevice) {
  StorageFixture f;
  const auto device = f.run(StorageMode::device);
  const auto host = f.run(StorageMode::host);
  ScratchDir dir;
  const auto disk = f.run(StorageMode::disk, false, dir.str());
  EXPECT_TRUE(dir.empty()) << "the storage files must be removed";
  EXPECT_EQ(host.v, device.v);
  // Written and read back in (4) chunks: the same numbers, summed over the 2 shots in another
  // order (per chunk rather than per run), hence round-off only.
  EXPECT_LT(relative_l2(disk.v, device.v), 1e-13);
  EXPECT_EQ(disk.source_amplitudes, device.source_amplitudes);
  EXPECT_GT(device.forward.storage_bytes, 0);
  EXPECT_EQ(disk.forward.storage_bytes, device.forward.storage_bytes);
  EXPECT_GT(dot(device.v, device.v), 0);
}

TEST(ScalarStorage, CompressionIsLossyOnlyInTheModelGradient) {
  StorageFixture f;
  const auto exact = f.run(StorageMode::device);
  const auto compressed = f.run(StorageMode::device, true);
  ScratchDir dir;
  const auto disk = f.run(StorageMode::disk, true, dir.str());
  EXPECT_TRUE(dir.empty());
  EXPECT_EQ(compressed.source_amplitudes, exact.source_amplitudes);
  EXPECT_EQ(compressed.forward.receiver_amplitudes, exact.forward.receiver_amplitudes);
  EXPECT_LT(relative_l2(disk.v, compressed.v), 1e-13);  // same chunks, same summation order
  const double e = relative_l2(compressed.v, exact.v);
  std::printf("8-bit compression: relative L2 error of grad_v %.3g, %.0f -> %.0f bytes\n", e,
              exact.forward.storage_bytes, compressed.forward.storage_bytes);
  // Deepwave documents 0.2-4 % in 2D for its 8-bit scheme, depending on the geometry; this small
  // random model gives 4.6 %.
  EXPECT_LT(e, 0.08);
  EXPECT_LT(compressed.forward.storage_bytes, 0.2 * exact.forward.storage_bytes);
}

TEST(ScalarStorage, NoneGivesNoModelGradient) {
  StorageFixture f;
  const auto exact = f.run(StorageMode::device);
  const auto none = f.run(StorageMode::none);
  EXPECT_EQ(none.v, std::vector<double>(exact.v.size(), 0.0));
  EXPECT_EQ(none.source_amplitudes, exact.source_amplitudes);
  EXPECT_EQ(none.forward.storage_bytes, 0);
}

TEST(ScalarStorage, SamplingIntervalApproximatesTheGradient) {
  StorageFixture f;
  const auto exact = f.run(StorageMode::device);
  f.opt.model_gradient_sampling_interval = 2;
  const auto sampled = f.run(StorageMode::device);
  const double e = relative_l2(sampled.v, exact.v);
  std::printf("model_gradient_sampling_interval 2: relative L2 difference of grad_v %.3g\n", e);
  EXPECT_GT(e, 0);
  EXPECT_LT(e, 0.5);
  EXPECT_LT(sampled.forward.storage_bytes, 0.6 * exact.forward.storage_bytes);
}

TEST(ScalarStorage, DiskFilesAreRemovedOnErrors) {
  StorageFixture f;
  ScratchDir dir;
  // The CUDA backend throws (not compiled, or no GPU) after the storage files were created;
  // where a GPU is present the run succeeds. Either way no file stays behind.
  try {
    ScalarOptions o = f.opt;
    o.storage = StorageMode::disk;
    o.storage_directory = dir.str();
    (void)scalar_gradient(Device{Backend::cuda, 0, false}, f.p.input(), o,
                          std::span<const double>(f.y));
  } catch (const Error&) {
  }
  EXPECT_TRUE(dir.empty());
}

// The default directory is the system's temporary one ($TMPDIR), never the current directory;
// one that is missing is refused naming the argument, and the files leave nothing behind.
TEST(ScalarStorage, DiskDefaultsToTmpdir) {
  StorageFixture f;
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  ScratchDir dir;
  ::setenv("TMPDIR", (dir.str() + "/missing").c_str(), 1);
  try {
    (void)f.run(StorageMode::disk, false, "");
    ADD_FAILURE() << "a missing $TMPDIR was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("storage_path"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("$TMPDIR"), std::string::npos) << e.what();
  }
  ::setenv("TMPDIR", dir.str().c_str(), 1);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.str());  // were "." used, a failed removal would show here
  const auto device = f.run(StorageMode::device);
  const auto disk = f.run(StorageMode::disk, false, "");
  std::filesystem::current_path(cwd);
  if (saved)
    ::setenv("TMPDIR", saved_value.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  EXPECT_TRUE(dir.empty());
  EXPECT_LT(relative_l2(disk.v, device.v), 1e-13);  // chunked sums: round-off only
}

// ---------------------------------------------------------------------------------------------
// Semantics: source scaling and timing, receivers before the step, continuation, CFL, work model

TEST(ScalarSemantics, SourceScalingAndReceiverTiming) {
  // One source, one receiver on it, one step: u^1[s] = -v^2 dt^2 f^0; receivers record u^0 and u^1.
  Problem<double> p;
  p.grid.ndim = 2;
  p.grid.shape = {9, 8, 1};
  p.grid.spacing = {5, 5, 1};
  p.v.assign(72, 2000.0);
  p.v[4 * 8 + 3] = 1800;
  p.dt = 1e-3;
  p.nt = 2;
  p.nsources = p.nreceivers = 1;
  p.sources = {4, 3};
  p.receivers = {4, 3};
  p.amplitudes = {1.5, 0.0};
  ScalarOptions opt;
  opt.max_vel = 2000;
  const auto out = scalar(kReference, p.input(), opt);
  ASSERT_EQ(out.step_ratio, 1);  // 0.6 / sqrt(2/25) / 2000 = 1.06 ms
  ASSERT_EQ(out.receiver_amplitudes.size(), 2u);
  EXPECT_EQ(out.receiver_amplitudes[0], 0.0);
  EXPECT_DOUBLE_EQ(out.receiver_amplitudes[1], -1800.0 * 1800.0 * 1e-6 * 1.5);
}

TEST(ScalarSemantics, ContinuationEqualsOneRun) {
  auto p = random_problem(2, {12, 10, 1}, 2, 1, 2, 20, 0.9, 12);
  ScalarOptions opt;
  opt.accuracy = 6;
  const auto whole = scalar(kReference, p.input(), opt);
  Problem<double> a = p, b = p;
  a.nt = 12;
  b.nt = 8;
  a.amplitudes.clear();
  b.amplitudes.clear();
  for (std::int64_t s = 0; s < p.nshots; ++s) {
    a.amplitudes.insert(a.amplitudes.end(), p.amplitudes.begin() + s * 20,
                        p.amplitudes.begin() + s * 20 + 12);
    b.amplitudes.insert(b.amplitudes.end(), p.amplitudes.begin() + s * 20 + 12,
                        p.amplitudes.begin() + s * 20 + 20);
  }
  const auto first = scalar(kReference, a.input(), opt);
  const auto second = scalar(kReference, b.input(), opt, &first.state);
  EXPECT_EQ(second.state.wavefield, whole.state.wavefield);
  EXPECT_EQ(second.state.psi[1], whole.state.psi[1]);
  for (std::int64_t r = 0; r < 2 * 2; ++r)
    for (std::int64_t t = 0; t < 8; ++t)
      EXPECT_EQ(second.receiver_amplitudes[r * 8 + t], whole.receiver_amplitudes[r * 20 + 12 + t]);
}

TEST(ScalarSemantics, NtInferredFromSourceAmplitudes) {
  auto p = random_problem(1, {20, 1, 1}, 2, 2, 1, 9, 0.9, 13);
  const auto given = scalar(kReference, p.input(), ScalarOptions{});
  p.nt = 0;
  const auto inferred = scalar(kReference, p.input(), ScalarOptions{});
  EXPECT_EQ(inferred.receiver_amplitudes, given.receiver_amplitudes);
}

TEST(ScalarSemantics, SurveyWindowPaddedShape) {
  auto p = random_problem(2, {20, 18, 1}, 1, 1, 1, 5, 0.9, 14);
  p.sources = {5, 6};
  p.receivers = {9, 8};
  ScalarOptions opt;
  opt.accuracy = 4;
  opt.pml_width = {3, 4, 2, 5, 0, 0};
  opt.survey_pad = {1, -1, 0, 2, 0, 0};
  const auto out = scalar(kReference, p.input(), opt);
  // dim 0: cells 4 .. 19 (16), dim 1: cells 6 .. 10 (5); + PML + 2 x 2 halo
  EXPECT_EQ(out.state.padded_shape[0], 16 + 3 + 4 + 4);
  EXPECT_EQ(out.state.padded_shape[1], 5 + 2 + 5 + 4);
}

TEST(ScalarCfl, StepRatioAndWarning) {
  Grid g;
  g.ndim = 2;
  g.shape = {10, 10, 1};
  g.spacing = {5, 5, 1};
  // max_dt = 0.6 / (sqrt(2) / 5) / 2000 = 1.0607 ms
  TimeStepping ts = cfl_time_stepping(g, 4e-3, 2000);
  EXPECT_EQ(ts.step_ratio, 4);
  EXPECT_DOUBLE_EQ(ts.inner_dt, 1e-3);
  ts = cfl_time_stepping(g, 1e-3, 2000);
  EXPECT_EQ(ts.step_ratio, 1);
  ts = cfl_time_stepping(g, 1e-3, 0);
  EXPECT_EQ(ts.step_ratio, 1);
  EXPECT_DOUBLE_EQ(ts.inner_dt, 1e-3);

  Problem<double> p;
  p.grid = g;
  p.v.assign(100, 2000.0);
  p.nt = 1;
  p.dt = 19 * 1.06e-3;  // step ratio 19: quiet
  testing::internal::CaptureStderr();
  EXPECT_EQ(scalar(kReference, p.input(), ScalarOptions{}).step_ratio, 19);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  p.dt = 25 * 1.06e-3;  // step ratio 25: one warning line, never an error
  testing::internal::CaptureStderr();
  EXPECT_EQ(scalar(kReference, p.input(), ScalarOptions{}).step_ratio, 25);
  const std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_EQ(warning.rfind("sciproxy: warning: ", 0), 0u) << warning;
  EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1);
}

TEST(ScalarWork, PointsBytesAndTimers) {
  auto p = random_problem(2, {12, 10, 1}, 2, 1, 2, 10, 0.9, 15);
  ScalarOptions opt;
  opt.accuracy = 4;
  opt.pml_width = {3, 4, 2, 5, 0, 0};
  Timers timers;
  const auto out = scalar<double>(kReference, p.input(), opt, nullptr, &timers);
  // padded 23 x 21, without the halo 19 x 17 cells, 10 steps, 2 shots; per step u^t, u^{t-1},
  // v read and u^{t+1} written, and psi, zeta read and written in the PML of each dimension
  // (3 + 4 rows of 17 cells, 2 + 5 columns of 19)
  EXPECT_EQ(out.work.points, 19.0 * 17 * 10 * 2);
  EXPECT_EQ(out.work.bytes, 8.0 * (4 * 19 * 17 + 4 * (7 * 17 + 7 * 19)) * 10 * 2);
  EXPECT_GT(out.work.flops, 20 * out.work.points);
  EXPECT_EQ(out.work.precision, Precision::fp64);
  for (const char* region : {"scalar", "scalar/setup", "scalar/resample", "scalar/forward"})
    EXPECT_NE(timers.find(region), nullptr) << region;
  const std::vector<double> y(static_cast<std::size_t>(2 * 2 * 10), 1.0);
  const auto g = scalar_gradient<double>(kReference, p.input(), opt, std::span<const double>(y),
                                         nullptr, nullptr, &timers);
  EXPECT_NE(timers.find("scalar/backward"), nullptr);
  EXPECT_EQ(g.forward.work.bytes, out.work.bytes + 8.0 * 19 * 17 * 10 * 2);  // + every stored step
  // The whole call: the forward pass and the adjoint's 6 arrays per cell, 4 per PML cell and
  // dimension, and the stored step and the gradient (3) per step.
  EXPECT_EQ(g.work.points, 2 * out.work.points);
  EXPECT_EQ(g.work.bytes, g.forward.work.bytes +
                              8.0 * (6 * 19 * 17 + 4 * (7 * 17 + 7 * 19) + 3 * 19 * 17) * 10 * 2);
}

// The cpu backend's bytes, counted by hand for a 3-D forward in sweeps of 4 steps (temporal
// blocking: each sweep reads and writes both buffers of u, of q and zeta once, and reads v once)
// and of one step; the roofline fraction of a blocked run then stays below 1.
TEST(ScalarWork, CpuBytesCountEachSweepOnce) {
  const Device cpu{Backend::cpu, 0, false};
  auto p = random_problem(3, {10, 9, 8}, 1, 1, 2, 10, 0.9, 23);
  ScalarOptions opt;
  opt.accuracy = 4;
  opt.pml_width = {2, 3, 1, 2, 2, 2};
  opt.nparallel = 1;
  opt.cpu.sweep_steps = 4;
  // Without the halo 15 x 12 x 12 cells; within the PML of a dimension: 5 of 15 planes, 3 of 12
  // rows, 4 of 12 columns.
  const double cells = 15.0 * 12 * 12, pml = 5.0 * 12 * 12 + 15.0 * 3 * 12 + 15.0 * 12 * 4;
  // Once per call, the copies in the backend's layout: u and u^{t-1} in and out, v to v and
  // v^2 dt^2, psi and zeta in and out.
  const double copies = 8.0 * (8 * cells + 3 * cells + 8 * pml);
  const auto blocked = scalar<double>(cpu, p.input(), opt);
  ASSERT_EQ(blocked.step_ratio, 1);
  // 10 steps: sweeps of 4, 4 and 2 steps; each u: 2 buffers read and written, v read; q: 2
  // buffers, zeta: 1, read and written.
  EXPECT_EQ(blocked.work.bytes, 3 * 8.0 * (5 * cells + 6 * pml) + copies);
  opt.cpu.sweep_steps = 1;
  const auto stepped = scalar<double>(cpu, p.input(), opt);
  EXPECT_EQ(stepped.work.bytes, 10 * 8.0 * (4 * cells + 4 * pml) + copies);
  EXPECT_EQ(stepped.work.points, blocked.work.points);
  EXPECT_EQ(stepped.receiver_amplitudes, blocked.receiver_amplitudes);
}

// ---------------------------------------------------------------------------------------------
// Bad input: the exception class, and a message that starts with the argument's name.

template <class F>
void expect_invalid(const std::string& argument, F&& f, const std::string& also = "") {
  try {
    f();
    ADD_FAILURE() << "no exception for " << argument;
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(argument, 0), 0u) << m;
    if (!also.empty()) {
      EXPECT_NE(m.find(also), std::string::npos) << m;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception for " << argument << ": " << e.what();
  }
}

TEST(ScalarBadInput, EveryCheckNamesItsArgument) {
  const auto good = random_problem(2, {10, 9, 1}, 2, 2, 2, 6, 0.9, 16);
  const ScalarOptions opt;
  auto forward = [&](const Problem<double>& p, const ScalarOptions& o = ScalarOptions{}) {
    return [p, o] { (void)scalar(kReference, p.input(), o); };
  };
  auto with = [&](auto change) {
    Problem<double> p = good;
    change(p);
    return p;
  };
  auto with_opt = [&](auto change) {
    ScalarOptions o;
    change(o);
    return o;
  };
  EXPECT_NO_THROW(forward(good)());

  // The grid is v's shape: its errors name v (the argument of every interface).
  expect_invalid("v", forward(with([](auto& p) { p.grid.ndim = 0; })), "1, 2 or 3 dimensions");
  expect_invalid("v", forward(with([](auto& p) { p.grid.ndim = 4; })), "1, 2 or 3 dimensions");
  expect_invalid("v", forward(with([](auto& p) { p.grid.shape[1] = 0; })), "along dimension 1");
  expect_invalid("grid_spacing[0]", forward(with([](auto& p) { p.grid.spacing[0] = 0; })));
  expect_invalid("grid_spacing[1]", forward(with([](auto& p) { p.grid.spacing[1] = -5; })));
  expect_invalid("grid_spacing[1]",
                 forward(with([](auto& p) { p.grid.spacing[1] = std::nan(""); })));
  expect_invalid("accuracy", forward(good, with_opt([](auto& o) { o.accuracy = 3; })));
  expect_invalid("v",
                 forward(with([](auto& p) {
                           p.grid.shape = {3, 9, 1};
                           p.v.resize(2 * 27);
                           p.sources = {0, 0, 1, 1, 2, 2, 0, 1};
                           p.receivers = {0, 0, 0, 0, 0, 0, 0, 0};
                         }),
                         with_opt([](auto& o) { o.accuracy = 8; })),
                 "accuracy/2");
  expect_invalid("nshots", forward(with([](auto& p) { p.nshots = 0; })));
  expect_invalid("nmodels", forward(with([](auto& p) { p.nmodels = 3; })));
  expect_invalid("v", forward(with([](auto& p) { p.v.pop_back(); })));
  expect_invalid("v", forward(with([](auto& p) { p.v[7] = std::nan(""); })), "nan");
  expect_invalid("dt", forward(with([](auto& p) { p.dt = 0; })));
  expect_invalid("dt", forward(with([](auto& p) { p.dt = -1e-3; })));
  expect_invalid("dt", forward(with([](auto& p) { p.dt = INFINITY; })));
  expect_invalid("nt", forward(with([](auto& p) { p.nt = -1; })));
  expect_invalid("source_amplitudes", forward(with([](auto& p) { p.amplitudes.pop_back(); })));
  expect_invalid("source_amplitudes", forward(with([](auto& p) { p.amplitudes[3] = INFINITY; })));
  expect_invalid("source_locations", forward(with([](auto& p) { p.sources.pop_back(); })));
  expect_invalid("source_locations", forward(with([](auto& p) { p.sources[2 * 2 + 1] = 9; })),
                 "shot 1, source 0");
  expect_invalid("receiver_locations", forward(with([](auto& p) { p.receivers[0] = -1; })),
                 "shot 0, receiver 0");
  expect_invalid("source_locations", forward(with([](auto& p) {
                   p.sources[2] = p.sources[0];
                   p.sources[3] = p.sources[1];
                 })),
                 "both at");
  expect_invalid("pml_width[3]", forward(good, with_opt([](auto& o) { o.pml_width[3] = -1; })));
  expect_invalid("survey_pad[0]", forward(good, with_opt([](auto& o) { o.survey_pad[0] = -2; })));
  expect_invalid("pml_freq", forward(good, with_opt([](auto& o) { o.pml_freq = std::nan(""); })));
  expect_invalid("pml_freq", forward(good, with_opt([](auto& o) { o.pml_freq = -1; })));
  expect_invalid("max_vel", forward(good, with_opt([](auto& o) { o.max_vel = -1; })));
  expect_invalid("max_vel", forward(good, with_opt([](auto& o) { o.max_vel = 1000; })),
                 "largest |v|");
  expect_invalid("model_gradient_sampling_interval",
                 forward(good, with_opt([](auto& o) { o.model_gradient_sampling_interval = 0; })));
  expect_invalid("freq_taper_frac",
                 forward(good, with_opt([](auto& o) { o.freq_taper_frac = 1.5; })));
  expect_invalid("time_pad_frac", forward(good, with_opt([](auto& o) { o.time_pad_frac = -0.1; })));
  expect_invalid("storage_mode",
                 forward(good, with_opt([](auto& o) { o.storage = static_cast<StorageMode>(7); })));
  expect_invalid("nparallel", forward(good, with_opt([](auto& o) { o.nparallel = -1; })));

  // states and gradients
  ScalarState<double> bad_state = scalar(kReference, good.input(), opt).state;
  bad_state.padded_shape[0] += 1;
  expect_invalid("wavefield_0 (and every initial wavefield",
                 [&] { (void)scalar(kReference, good.input(), opt, &bad_state); });
  bad_state.padded_shape[0] -= 1;
  bad_state.psi[1].pop_back();
  expect_invalid("psix_m1", [&] { (void)scalar(kReference, good.input(), opt, &bad_state); });
  const std::vector<double> short_y(5, 1.0);
  expect_invalid("grad_receiver_amplitudes", [&] {
    (void)scalar_gradient(kReference, good.input(), opt, std::span<const double>(short_y));
  });
  expect_invalid("grad_final_state['psix_m1']", [&] {
    (void)scalar_gradient<double>(kReference, good.input(), opt, std::span<const double>(), nullptr,
                                  &bad_state);
  });
  ScalarOptions disk;
  disk.storage = StorageMode::disk;
  disk.storage_directory = "/nonexistent/sciproxy/directory";
  expect_invalid("storage_path", [&] {
    (void)scalar_gradient(kReference, good.input(), disk, std::span<const double>());
  });
  Grid g = good.grid;
  expect_invalid("dt", [&] { (void)cfl_time_stepping(g, std::nan(""), 2000); });
  expect_invalid("max_vel", [&] { (void)cfl_time_stepping(g, 1e-3, -1); });
  g.spacing[0] = 0;
  expect_invalid("grid_spacing[0]", [&] { (void)cfl_time_stepping(g, 1e-3, 2000); });
}

TEST(ScalarBadInput, FloatInputsToo) {
  // the float path shares the checks; one representative
  const auto p = random_problem(1, {12, 1, 1}, 1, 1, 1, 4, 0.9, 17);
  std::vector<float> v(p.v.begin(), p.v.end()), a(p.amplitudes.begin(), p.amplitudes.end());
  v[3] = std::nanf("");
  ScalarInput<float> in;
  in.grid = p.grid;
  in.v = v;
  in.dt = p.dt;
  in.nt = p.nt;
  in.nsources = in.nreceivers = 1;
  in.source_amplitudes = a;
  in.source_locations = p.sources;
  in.receiver_locations = p.receivers;
  expect_invalid("v", [&] { (void)scalar(kReference, in, ScalarOptions{}); });
}

}  // namespace
