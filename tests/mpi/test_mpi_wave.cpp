// The scalar family on 1, 2 and 3 ranks against one process: forward modelling bit for bit
// (receiver data and final states, every layout, the shots given to every rank or each rank its
// own, models shared or one per shot, 2-D and 3-D, fewer shots than ranks), the gradient (source
// and per-shot model gradients bit for bit; a shared model's gradient, summed over the ranks in
// another order, to a stated relative tolerance); ranks that disagree fail on every rank.
#include <gtest/gtest.h>

#include <cmath>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/wave.hpp"

namespace sciproxy::test {
namespace {

using namespace sciproxy::wave;

const Device kCpu{Backend::cpu, 0, false};

// A layered model, one source per shot moving along the surface, receivers on a line.
template <class T>
struct Survey {
  Grid grid;
  std::vector<T> v, amplitudes;
  std::vector<std::int64_t> sources, receivers;
  std::int64_t nshots, nmodels, nt = 60, nreceivers = 6;
  double dt = 0.002;

  Survey(int ndim, std::int64_t nshots_, bool model_per_shot) : nshots(nshots_) {
    grid.ndim = ndim;
    grid.shape = ndim == 2 ? std::array<std::int64_t, 3>{24, 30, 1}
                           : std::array<std::int64_t, 3>{12, 14, 16};
    grid.spacing = {5, 5, 5};
    nmodels = model_per_shot ? nshots : 1;
    const std::int64_t cells = grid.cells();
    for (std::int64_t m = 0; m < nmodels; ++m)
      for (std::int64_t i = 0; i < cells; ++i)
        v.push_back(static_cast<T>(1500 + 500 * (i / (cells / grid.shape[0]) > grid.shape[0] / 2) +
                                   10 * m));
    const auto wavelet = seismic::ricker_wavelet<T>(25, dt, nt);
    for (std::int64_t s = 0; s < nshots; ++s) {
      amplitudes.insert(amplitudes.end(), wavelet.begin(), wavelet.end());
      const std::int64_t x = 2 + (3 * s) % (grid.shape[ndim - 1] - 4);
      sources.push_back(1);
      if (ndim == 3) sources.push_back(grid.shape[1] / 2);
      sources.push_back(x);
      for (std::int64_t r = 0; r < nreceivers; ++r) {
        receivers.push_back(2);
        if (ndim == 3) receivers.push_back(1 + r);
        receivers.push_back(1 + (ndim == 3 ? 2 : 4) * r);
      }
    }
  }
  ScalarInput<T> input() const {
    ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.nmodels = nmodels;
    in.dt = dt;
    in.nt = nt;
    in.nshots = nshots;
    in.nsources = 1;
    in.nreceivers = nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }
  // Shots [first, first + count) only, for RankItems::own (the model is shared then).
  ScalarInput<T> shots(std::int64_t first, std::int64_t count) const {
    ScalarInput<T> in = input();
    const auto dim = static_cast<std::size_t>(grid.ndim);
    in.nshots = count;
    in.source_amplitudes = in.source_amplitudes.subspan(first * nt, count * nt);
    in.source_locations = in.source_locations.subspan(first * dim, count * dim);
    in.receiver_locations =
        in.receiver_locations.subspan(first * nreceivers * dim, count * nreceivers * dim);
    return in;
  }
};

ScalarOptions small_pml() {
  ScalarOptions o;
  o.pml_width = {6, 6, 6, 6, 6, 6};
  return o;
}

template <class T>
std::vector<T> rows(const std::vector<T>& whole, std::int64_t total, collective::Block b) {
  const auto row = static_cast<std::int64_t>(whole.size()) / total;
  return {whole.begin() + b.first * row, whole.begin() + (b.first + b.count) * row};
}

template <class T>
void check_forward(int ndim, std::int64_t nshots, bool model_per_shot) {
  const auto& comm = world();
  const Survey<T> survey(ndim, nshots, model_per_shot);
  const auto expected = scalar<T>(kCpu, survey.input(), small_pml());
  const auto block = collective::block_of(nshots, comm);
  for (const RankItems given : {RankItems::all, RankItems::own}) {
    if (given == RankItems::own && model_per_shot) continue;  // own shots share the model
    for (const ResultLayout layout :
         {ResultLayout::all_ranks, ResultLayout::root, ResultLayout::own}) {
      SCOPED_TRACE(::testing::Message()
                   << ndim << "-D, " << nshots << " shots, given " << int(given) << ", layout "
                   << int(layout) << ", ranks " << comm.size());
      ScalarOptions opt = small_pml();
      opt.comm = comm;
      opt.shots = given;
      opt.results = layout;
      const auto in =
          given == RankItems::all ? survey.input() : survey.shots(block.first, block.count);
      const auto got = scalar<T>(kCpu, in, opt);
      EXPECT_EQ(got.step_ratio, expected.step_ratio);
      EXPECT_EQ(got.state.padded_shape, expected.state.padded_shape);
      const bool whole =
          layout == ResultLayout::all_ranks || (layout == ResultLayout::root && comm.rank() == 0);
      if (whole) {
        EXPECT_EQ(got.receiver_amplitudes, expected.receiver_amplitudes);
        EXPECT_EQ(got.state.wavefield, expected.state.wavefield);
        EXPECT_EQ(got.state.previous_wavefield, expected.state.previous_wavefield);
        EXPECT_EQ(got.state.psi[0], expected.state.psi[0]);
        EXPECT_EQ(got.state.zeta[ndim - 1], expected.state.zeta[ndim - 1]);
      } else if (layout == ResultLayout::own) {
        EXPECT_EQ(got.receiver_amplitudes, rows(expected.receiver_amplitudes, nshots, block));
        EXPECT_EQ(got.state.wavefield, rows(expected.state.wavefield, nshots, block));
      } else {
        EXPECT_TRUE(got.receiver_amplitudes.empty());
        EXPECT_TRUE(got.state.wavefield.empty());
      }
      // The work is the whole call's, whichever rank reports it.
      EXPECT_DOUBLE_EQ(got.work.points, expected.work.points);
    }
  }
}

TEST(MpiWave, ForwardIsTheOneProcessRunBitForBit) {
  check_forward<float>(2, 5, false);
  check_forward<double>(2, 4, true);
  check_forward<float>(2, 1, false);  // fewer shots than ranks
  check_forward<float>(3, 2, false);
}

template <class T>
void check_gradient(std::int64_t nshots, bool model_per_shot, double shared_rtol) {
  const auto& comm = world();
  const Survey<T> survey(2, nshots, model_per_shot);
  const auto in = survey.input();
  std::vector<T> residual(static_cast<std::size_t>(nshots * survey.nreceivers * survey.nt));
  for (std::size_t i = 0; i < residual.size(); ++i)
    residual[i] = static_cast<T>(std::sin(0.37 * double(i)));
  const auto expected = scalar_gradient<T>(kCpu, in, small_pml(), residual);
  for (const ResultLayout layout : {ResultLayout::all_ranks, ResultLayout::root}) {
    SCOPED_TRACE(::testing::Message()
                 << nshots << " shots, layout " << int(layout) << ", ranks " << comm.size());
    ScalarOptions opt = small_pml();
    opt.comm = comm;
    opt.results = layout;
    const auto got = scalar_gradient<T>(kCpu, in, opt, residual);
    // A shared model's gradient is every rank's sum on every rank; models per shot are rows.
    if (model_per_shot) {
      if (layout == ResultLayout::all_ranks || comm.rank() == 0) {
        EXPECT_EQ(got.v, expected.v);
      }
    } else {
      Tolerance tolerance;
      tolerance.rel_l2 = shared_rtol;
      const auto c =
          compare<T, T>(std::span<const T>(got.v), std::span<const T>(expected.v), tolerance);
      EXPECT_TRUE(c.pass) << c.summary();
      if (!comm.distributed()) {
        EXPECT_EQ(got.v, expected.v);
      }
    }
    if (layout == ResultLayout::all_ranks || comm.rank() == 0) {
      EXPECT_EQ(got.source_amplitudes, expected.source_amplitudes);
      EXPECT_EQ(got.forward.receiver_amplitudes, expected.forward.receiver_amplitudes);
    } else {
      EXPECT_TRUE(got.source_amplitudes.empty());
    }
  }
}

TEST(MpiWave, GradientsAreTheOneProcessGradients) {
  // The shared model's gradient sums per-rank partial sums: float32 rounds differently at about
  // 1e-7 relative per addition, float64 at 1e-16; the bounds leave room for a few shots' worth.
  check_gradient<double>(5, false, 1e-13);
  check_gradient<float>(4, false, 1e-5);
  check_gradient<double>(3, true, 0);
  check_gradient<double>(1, false, 1e-13);  // fewer shots than ranks
}

// Born modelling of a box scatter, and its adjoint: per-shot data bit for bit, the shared
// image summed over the ranks to the tolerance of check_gradient.
TEST(MpiWave, BornIsTheOneProcessBorn) {
  const auto& comm = world();
  const Survey<double> survey(2, 4, false);
  std::vector<double> scatter(survey.v.size(), 0.0);
  for (std::size_t i = 300; i < 340; ++i) scatter[i] = 50;
  ScalarBornInput<double> in;
  in.background = survey.input();
  in.scatter = scatter;
  in.nbg_receivers = survey.nreceivers;
  in.bg_receiver_locations = survey.receivers;
  const auto expected = scalar_born<double>(kCpu, in, small_pml());
  ScalarOptions opt = small_pml();
  opt.comm = comm;
  const auto got = scalar_born<double>(kCpu, in, opt);
  EXPECT_EQ(got.receiver_amplitudes, expected.receiver_amplitudes);
  EXPECT_EQ(got.bg_receiver_amplitudes, expected.bg_receiver_amplitudes);
  EXPECT_EQ(got.scattered_state.wavefield, expected.scattered_state.wavefield);

  const auto& residual = expected.receiver_amplitudes;
  const auto want = scalar_born_gradient<double>(kCpu, in, small_pml(), residual,
                                                 expected.bg_receiver_amplitudes);
  const auto image =
      scalar_born_gradient<double>(kCpu, in, opt, residual, expected.bg_receiver_amplitudes);
  EXPECT_EQ(image.source_amplitudes, want.source_amplitudes);
  EXPECT_EQ(image.forward.receiver_amplitudes, want.forward.receiver_amplitudes);
  Tolerance tolerance;
  tolerance.rel_l2 = 1e-13;
  const auto c = compare<double, double>(std::span<const double>(image.scatter),
                                         std::span<const double>(want.scatter), tolerance);
  EXPECT_TRUE(c.pass) << c.summary();
}

TEST(MpiWave, RanksThatDisagreeFailOnEveryRank) {
  const auto& comm = world();
  if (!comm.distributed()) GTEST_SKIP() << "needs 2 ranks or more";
  const int odd = comm.size() - 1;
  Survey<double> survey(2, 4, false);
  auto in = survey.input();
  if (comm.rank() == odd) in.dt = 0.0021;
  ScalarOptions opt = small_pml();
  opt.comm = comm;
  expect_error_on_every_rank<InvalidArgument>([&] { scalar<double>(kCpu, in, opt); },
                                              fmt::format("the ranks disagree on the values of dt: "
                                                          "rank 0 and rank {}",
                                                          odd));
  in.dt = survey.dt;
  ScalarOptions other = opt;
  if (comm.rank() == odd) other.accuracy = 8;
  expect_error_on_every_rank<InvalidArgument>(
      [&] { scalar<double>(kCpu, in, other); },
      fmt::format("the ranks disagree on accuracy: rank 0 passed 4, rank {} passed 8", odd));
  // A source outside the model on one rank's copy: every rank fails, naming it.
  Survey<double> bad(2, 4, false);
  const auto block = collective::block_of(4, comm);
  if (comm.rank() == odd) bad.sources[block.first * 2 + 1] = 1000;  // its first shot's source
  ScalarOptions mine = opt;
  mine.shots = RankItems::own;  // own shots: the locations are each rank's, not compared
  expect_error_on_every_rank<InvalidArgument>(
      [&] { scalar<double>(kCpu, bad.shots(block.first, block.count), mine); },
      fmt::format("rank {} of {}: source_locations", odd, comm.size()));
}

TEST(MpiWave, HarnessRunsTheScalarCasesOnTheRanks) {
  const auto& comm = world();
  HarnessOptions options;
  options.comm = comm;
  options.repetitions = 1;
  options.measure_roofline = false;
  const CaseSettings settings{
      {{"shots", "3"}, {"receivers", "20"}, {"nt", "40"}, {"shape0", "30"}, {"shape1", "40"}}};
  for (const char* name : {"scalar", "scalar_gradient", "scalar_born", "scalar_born_gradient"}) {
    const auto results = run_case(find_case(name), settings, {kCpu}, options);
    if (comm.rank() == 0) {
      ASSERT_TRUE(results.front().report.verification.has_value()) << name;
      EXPECT_TRUE(results.front().report.passed())
          << name << ": " << results.front().report.verification->summary();
    }
  }
}

}  // namespace
}  // namespace sciproxy::test
