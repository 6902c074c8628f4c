// The scalar propagator's kernels (src/wave/kernels.hpp) on the backend under test
// (tests/common/backend_test.hpp: cpu, or cuda with the label gpu) against the reference backend,
// on random problems built by hand on the kernel interface: small padded grids (zero halos),
// random C-PML profiles that vanish in the interior box (the box shrunk by a random margin, b and
// b' vanishing there or only in the box itself, PML widths 0..5 per side), random fields with
// zero halos, random v; ndim 1..3, accuracy 2/4/6/8, float and double, shared and batched v,
// several shots, sources and receivers (the second receiver of a shot shares the first's cell),
// store_interval 0 to 3, odd and even step counts. Compared: the forward outputs (final state,
// receivers, stored 2 v dt^2 W) and the backward outputs (gradient of the initial state, of the
// sources, accumulated grad_v), the backward passes from the reference's stored fields.
// Independently of the reference: the backward pass is the transpose of the forward one
// (dot-product test) and grad_v is the derivative of the forward pass (central differences),
// both in float64. On cpu also: 1 and 2 threads give bit-identical results. On cuda also: the
// agreement with the cpu backend (the same arithmetic, math.hpp), the CUDA-event timers, the
// storage streamed through the host, a 64^3 problem, a bad device index.
// Tolerance: src/wave/case.hpp's scalar_tolerance for every output, final states included
// (tighter than scalar_state_tolerance: these runs are at most 20 steps on tiny grids; both
// earlier tests held states to it): ||got - ref|| / ||ref|| <= 1e-5 in float32 (the reference
// accumulates in double, rounding to float once per step), 1e-12 in float64 (order of the sums).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "wave/case.hpp"
#include "wave/kernels.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace sciproxy::wave::kernels;
using std::int64_t;
using test::kBackend;
using test::kReference;
using test::kTestingCuda;

namespace {

const Device kCpu{Backend::cpu, 0, false};

template <class T>
Tolerance tolerance() {
  return scalar_tolerance(precision_of<T>(), false);
}

struct Shape {
  int ndim = 2;
  int accuracy = 4;
  int64_t nshots = 2;
  bool v_batched = false;
  int64_t store_interval = 1;
  int64_t nt = 7;
  int64_t nsources = 2, nreceivers = 3;
  int64_t min_model = 1, max_model = 10;  // model cells per dimension (PML and halo on top)
  std::array<int64_t, 3> model_cells{};   // where > 0, the model cells of that dimension
  int64_t max_pml = 5;                    // PML cells per side: 0 .. max_pml
  int64_t fixed_pml = -1;                 // >= 0: every side gets this many
};

// The propagator's state (or its gradient) for all shots: u, u_prev, psi and zeta per dimension.
template <class T>
struct State {
  std::vector<T> u, u_prev;
  std::array<std::vector<T>, kMaxDims> psi, zeta;

  ScalarFields<T> fields(int ndim) {
    ScalarFields<T> f;
    f.u = u.data();
    f.u_prev = u_prev.data();
    for (int d = 0; d < ndim; ++d) {
      f.psi[d] = psi[d].data();
      f.zeta[d] = zeta[d].data();
    }
    return f;
  }
  std::vector<std::vector<T>*> arrays(int ndim) {
    std::vector<std::vector<T>*> all{&u, &u_prev};
    for (int d = 0; d < ndim; ++d) {
      all.push_back(&psi[d]);
      all.push_back(&zeta[d]);
    }
    return all;
  }
};

template <class T>
struct ForwardResult {
  State<T> state;
  std::vector<T> receivers, stored;
};

template <class T>
struct BackwardResult {
  State<T> state;
  std::vector<T> grad_sources, grad_v;
};

template <class T>
struct RandomProblem {
  Shape shape;
  int64_t h = 0, points = 0;
  ScalarProblem<T> p;
  std::vector<T> v;
  std::array<std::vector<T>, kMaxDims> a, b, dbdx;
  std::vector<int64_t> source_cells, receiver_cells;
  State<T> initial, grad_final;
  std::vector<T> sources, grad_receivers, grad_v0;

  RandomProblem(std::mt19937_64& rng, const Shape& s) : shape(s) {
    auto uniform = [&](double lo, double hi) {
      return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    auto integer = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    h = s.accuracy / 2;
    p.ndim = s.ndim;
    p.accuracy = s.accuracy;
    p.nshots = s.nshots;
    p.nt = s.nt;
    p.store_interval = s.store_interval;
    p.v_batched = s.v_batched;
    double dx_min = 1e9;
    for (int d = 0; d < s.ndim; ++d) {
      // [halo | PML low | model | PML high | halo]; a PML of width 0 is a side without one.
      const int64_t wlo = s.fixed_pml >= 0 ? s.fixed_pml : integer(0, s.max_pml);
      const int64_t whi = s.fixed_pml >= 0 ? s.fixed_pml : integer(0, s.max_pml);
      const int64_t model =
          s.model_cells[d] > 0 ? s.model_cells[d] : integer(s.min_model, s.max_model);
      p.n[d] = 2 * h + wlo + model + whi;
      const double dx = uniform(0.8, 1.25);
      dx_min = std::min(dx_min, dx);
      p.rdx[d] = T(1 / dx);
      p.rdx2[d] = T(1 / (dx * dx));
      // The interior box: the model, shrunk by a random margin (window.cpp uses 3 h). a vanishes
      // within h of it (the a psi that interior stencils read are zero); b and b' vanish either
      // there too or only in the box itself (then the adjoint's stencils see b != 0).
      const int64_t margin = integer(0, 1) * integer(1, h);
      const int64_t lo = h + wlo + margin, hi = std::max(lo, p.n[d] - h - whi - margin);
      p.pml_interior[2 * d] = lo;
      p.pml_interior[2 * d + 1] = hi;
      const bool b_wide = integer(0, 1) == 1;
      for (auto* prof : {&a[d], &b[d], &dbdx[d]})
        prof->assign(static_cast<std::size_t>(p.n[d]), T(0));
      for (int64_t x = 0; x < p.n[d]; ++x) {
        const bool a_zero = x >= lo - h && x < hi + h;
        const bool b_zero = b_wide ? a_zero : (x >= lo && x < hi);
        if (!a_zero) a[d][x] = T(uniform(0.2, 0.95));
        if (!b_zero) {
          b[d][x] = T(uniform(-0.8, -0.05));
          dbdx[d][x] = T(uniform(-0.3, 0.3));
        }
      }
      p.a[d] = a[d].data();
      p.b[d] = b[d].data();
      p.dbdx[d] = dbdx[d].data();
    }
    points = p.points();
    const double vmax = 1.0;
    p.dt2 = T(std::pow(0.4 * dx_min / (vmax * std::sqrt(double(s.ndim))), 2));
    v.resize(static_cast<std::size_t>((s.v_batched ? s.nshots : 1) * points));
    for (auto& x : v) x = T(uniform(0.5, vmax));
    p.v = v.data();

    // Sources: distinct non-halo cells per shot; receivers: any non-halo cells, the second of a
    // shot in the first's cell (cuda groups the reads of one cell).
    std::vector<int64_t> cells;
    for (int64_t i = 0; i < points; ++i)
      if (!halo(i)) cells.push_back(i);
    p.nsources = std::min<int64_t>(s.nsources, static_cast<int64_t>(cells.size()));
    p.nreceivers = s.nreceivers;
    for (int64_t shot = 0; shot < s.nshots; ++shot) {
      std::shuffle(cells.begin(), cells.end(), rng);
      source_cells.insert(source_cells.end(), cells.begin(), cells.begin() + p.nsources);
      for (int64_t r = 0; r < p.nreceivers; ++r)
        receiver_cells.push_back(
            r == 1 ? receiver_cells.back()
                   : cells[static_cast<std::size_t>(integer(0, int64_t(cells.size()) - 1))]);
    }
    p.source_cells = source_cells.data();
    p.receiver_cells = receiver_cells.data();

    auto random_vector = [&](int64_t n) {
      std::vector<T> x(static_cast<std::size_t>(n));
      for (auto& e : x) e = T(uniform(-1, 1));
      return x;
    };
    sources = random_vector(s.nt * s.nshots * p.nsources);
    grad_receivers = random_vector(s.nt * s.nshots * p.nreceivers);
    grad_v0 = random_vector((s.v_batched ? s.nshots : 1) * points);
    // Initial state: zero halos, psi and zeta zero in the interior box of their dimension (as the
    // interface requires). Final-state gradient: anything outside the halo.
    initial = random_state(uniform, true);
    grad_final = random_state(uniform, false);
  }
  RandomProblem(const RandomProblem&) = delete;  // p points into the vectors
  RandomProblem& operator=(const RandomProblem&) = delete;

  std::array<int64_t, kMaxDims> coordinates(int64_t i) const {
    return {i / (p.n[1] * p.n[2]), (i / p.n[2]) % p.n[1], i % p.n[2]};
  }
  bool halo(int64_t i) const {
    const auto x = coordinates(i);
    for (int d = 0; d < p.ndim; ++d)
      if (x[d] < h || x[d] >= p.n[d] - h) return true;
    return false;
  }

  template <class U>
  State<T> random_state(U& uniform, bool respect_interior) const {
    State<T> st;
    const int64_t size = p.nshots * points;
    auto field = [&](int dim) {
      std::vector<T> f(static_cast<std::size_t>(size), T(0));
      for (int64_t q = 0; q < size; ++q) {
        const int64_t i = q % points;
        if (halo(i)) continue;
        if (dim >= 0 && respect_interior) {
          const int64_t x = coordinates(i)[dim];
          if (x >= p.pml_interior[2 * dim] && x < p.pml_interior[2 * dim + 1]) continue;
        }
        f[q] = T(uniform(-1, 1));
      }
      return f;
    };
    st.u = field(-1);
    st.u_prev = field(-1);
    for (int d = 0; d < p.ndim; ++d) {
      st.psi[d] = field(d);
      st.zeta[d] = field(d);
    }
    return st;
  }

  int64_t nstored() const {
    return p.store_interval > 0 ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  }
};

// The kernels of the backend `device` names (the one switch is SCIPROXY_RUN_KERNEL's).
template <class T>
ForwardResult<T> run_forward(const Device& device, const RandomProblem<T>& rp,
                             const ScalarProblem<T>& p, State<T> state, Timers* timers = nullptr) {
  ForwardResult<T> r;
  r.state = std::move(state);
  r.receivers.assign(static_cast<std::size_t>(p.nt * p.nshots * p.nreceivers), T(-7));
  r.stored.assign(static_cast<std::size_t>(rp.nstored() * p.nshots * rp.points), T(0));
  const Context context{device, timers};
  SCIPROXY_RUN_KERNEL(context, scalar_forward, p, r.state.fields(p.ndim), rp.sources.data(),
                      r.receivers.data(), r.stored.empty() ? nullptr : r.stored.data());
  return r;
}

template <class T>
BackwardResult<T> run_backward(const Device& device, const RandomProblem<T>& rp,
                               const ScalarProblem<T>& p, const std::vector<T>& stored) {
  BackwardResult<T> r;
  r.state = rp.grad_final;
  r.grad_sources.assign(static_cast<std::size_t>(p.nt * p.nshots * p.nsources), T(-7));
  r.grad_v = rp.grad_v0;  // non-zero: grad_v is accumulated
  const Context context{device, nullptr};
  SCIPROXY_RUN_KERNEL(context, scalar_backward, p, r.state.fields(p.ndim), rp.grad_receivers.data(),
                      r.grad_sources.data(), stored.empty() ? nullptr : stored.data(),
                      stored.empty() ? nullptr : r.grad_v.data());
  return r;
}

template <class T>
::testing::AssertionResult close(const std::vector<T>& got, const std::vector<T>& want,
                                 const std::string& what) {
  const auto c = compare<T, T>(std::span<const T>(got), std::span<const T>(want), tolerance<T>());
  if (c.pass) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << c.summary();
}

template <class T>
void expect_close(const ForwardResult<T>& got, const ForwardResult<T>& want, int ndim,
                  const std::string& label) {
  const char* names[] = {"u", "u_prev", "psi0", "zeta0", "psi1", "zeta1", "psi2", "zeta2"};
  auto g_state = got.state, w_state = want.state;
  const auto w = w_state.arrays(ndim), g = g_state.arrays(ndim);
  for (std::size_t k = 0; k < w.size(); ++k)
    EXPECT_TRUE(close(*g[k], *w[k], label + " forward " + names[k]));
  EXPECT_TRUE(close(got.receivers, want.receivers, label + " receivers"));
  EXPECT_TRUE(close(got.stored, want.stored, label + " stored"));
}

template <class T>
void expect_close(const BackwardResult<T>& got, const BackwardResult<T>& want, int ndim,
                  const std::string& label) {
  const char* names[] = {"u", "u_prev", "psi0", "zeta0", "psi1", "zeta1", "psi2", "zeta2"};
  auto g_state = got.state, w_state = want.state;
  const auto w = w_state.arrays(ndim), g = g_state.arrays(ndim);
  for (std::size_t k = 0; k < w.size(); ++k)
    EXPECT_TRUE(close(*g[k], *w[k], label + " backward " + names[k]));
  EXPECT_TRUE(close(got.grad_sources, want.grad_sources, label + " grad_sources"));
  EXPECT_TRUE(close(got.grad_v, want.grad_v, label + " grad_v"));
}

// Forward and backward on the backend under test against the reference (on cuda also against
// the cpu backend); the backward passes read the same stored fields (the reference's), so that
// each pass is compared alone.
template <class T>
void compare_with_reference(const RandomProblem<T>& rp, const std::string& label) {
  const auto& p = rp.p;
  const auto want = run_forward<T>(kReference, rp, p, rp.initial);
  Timers timers;
  const auto got = run_forward<T>(kBackend, rp, p, rp.initial, &timers);
  expect_close(got, want, p.ndim, label);
  const auto bwant = run_backward<T>(kReference, rp, p, want.stored);
  const auto bgot = run_backward<T>(kBackend, rp, p, want.stored);
  expect_close(bgot, bwant, p.ndim, label);
  if constexpr (kTestingCuda) {
    for (const char* region : {"upload", "steps", "download"})
      EXPECT_NE(timers.find(region), nullptr) << label << ": timer region " << region;
    expect_close(got, run_forward<T>(kCpu, rp, p, rp.initial), p.ndim, label + " (cpu)");
    expect_close(bgot, run_backward<T>(kCpu, rp, p, want.stored), p.ndim, label + " (cpu)");
  }
}

std::string describe(const Shape& s) {
  return "ndim " + std::to_string(s.ndim) + " accuracy " + std::to_string(s.accuracy) +
         (s.v_batched ? " batched" : " shared") + " interval " + std::to_string(s.store_interval) +
         " nshots " + std::to_string(s.nshots) + " nt " + std::to_string(s.nt);
}

template <class T>
void sweep(std::uint64_t seed, int ndim) {
  std::mt19937_64 rng(seed);
  // Two random problems per (accuracy, shared/batched v, store interval).
  for (int trial = 0; trial < 32; ++trial) {
    Shape s;
    s.ndim = ndim;
    s.accuracy = 2 + 2 * (trial % 4);
    s.v_batched = (trial / 4) % 2 == 1;
    s.store_interval = (trial / 8) % 2 == 0 ? 1 : 3;
    s.nshots = 1 + trial % 3;
    s.nt = 6 + (trial / 3) % 4;  // odd and even step counts (buffer parity)
    s.max_model = ndim == 1 ? 40 : ndim == 2 ? 12 : 6;
    const RandomProblem<T> rp(rng, s);
    compare_with_reference(rp, describe(s));
  }
}

double dot(const std::vector<double>& x, const std::vector<double>& y, double* magnitude) {
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum += x[i] * y[i];
    *magnitude += std::abs(x[i] * y[i]);
  }
  return sum;
}

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

class WaveKernels : public test::BackendTest {};

}  // namespace

TEST_F(WaveKernels, MatchReference1D) {
  sweep<float>(11, 1);
  sweep<double>(12, 1);
}

TEST_F(WaveKernels, MatchReference2D) {
  sweep<float>(21, 2);
  sweep<double>(22, 2);
}

TEST_F(WaveKernels, MatchReference3D) {
  sweep<float>(31, 3);
  sweep<double>(32, 3);
}

// Longer runs (10 to 19 steps) on models of 3..7 cells with PML 0..4 per side, every store
// interval 1..3.
TEST_F(WaveKernels, MatchReferenceOnLongerRuns) {
  std::mt19937_64 rng(20240611);
  for (int ndim = 1; ndim <= 3; ++ndim)
    for (int accuracy = 2; accuracy <= 8; accuracy += 2)
      for (int trial = 0; trial < 2; ++trial) {
        Shape s;
        s.ndim = ndim;
        s.accuracy = accuracy;
        s.nshots = 1 + (trial + accuracy / 2) % 3;
        s.v_batched = trial == 1;
        s.nt = 9 + 7 * trial + ndim;
        s.store_interval = 1 + (accuracy / 2 + trial) % 3;
        s.min_model = 3;
        s.max_model = 7;
        s.max_pml = 4;
        compare_with_reference(RandomProblem<float>(rng, s), "float " + describe(s));
        compare_with_reference(RandomProblem<double>(rng, s), "double " + describe(s));
      }
}

// 3-D work items over long rows: at accuracy 4, tiles of about 30 rows (two per plane here) that
// run through the planes; at accuracy 8 a tile would be thinner than 6h rows, and the blocks are
// whole planes (Blocks in src/wave/cpu_blocking.hpp). Sources and receivers fall in many blocks.
TEST_F(WaveKernels, ThreeDimensionalTilesAndWholePlanes) {
  std::mt19937_64 rng(61);
  for (int accuracy : {4, 8}) {
    Shape s;
    s.ndim = 3;
    s.accuracy = accuracy;
    s.store_interval = 2;
    s.nsources = 4;
    s.nreceivers = 12;
    s.model_cells = {5, 50, 200};
    compare_with_reference(RandomProblem<float>(rng, s),
                           "3-D long rows, accuracy " + std::to_string(accuracy));
  }
}

TEST_F(WaveKernels, NoStorageNoSourcesOrReceiversNoPml) {
  std::mt19937_64 rng(41);
  for (int ndim : {1, 2, 3}) {
    Shape s;
    s.ndim = ndim;
    s.accuracy = 8;
    s.store_interval = 0;
    s.nsources = 0;
    s.nreceivers = 0;
    s.nt = 5;
    s.max_model = ndim == 3 ? 6 : 12;
    compare_with_reference(RandomProblem<double>(rng, s), "nothing in or out, " + describe(s));
  }
  // No PML at all: the interior box is everything.
  Shape s;
  s.ndim = 3;
  s.nsources = 2;
  s.nreceivers = 4;
  s.nt = 16;
  s.min_model = 3;
  s.max_model = 7;
  s.fixed_pml = 0;
  compare_with_reference(RandomProblem<float>(rng, s), "no PML");
}

// Storage that does not fit: on cuda the snapshots stream through the ring (more snapshots than
// slots); the host backends ignore the limit.
TEST_F(WaveKernels, StreamedStorage) {
  const ScopedEnv limit("SCIPROXY_WAVE_CUDA_STORAGE_LIMIT", "0");
  std::mt19937_64 rng(11);
  for (int ndim = 2; ndim <= 3; ++ndim)
    for (int64_t interval : {1, 3}) {
      Shape s;
      s.ndim = ndim;
      s.accuracy = 4 + 2 * (ndim - 2);
      s.nshots = 3;
      s.v_batched = interval == 3;
      s.nt = 20;
      s.store_interval = interval;
      s.min_model = 3;
      s.max_model = 7;
      s.max_pml = 4;
      compare_with_reference(RandomProblem<float>(rng, s), "streamed storage, " + describe(s));
      compare_with_reference(RandomProblem<double>(rng, s), "streamed storage, " + describe(s));
    }
}

// The cpu forward copies psi and zeta back only outside the interior box, widened by a vector
// along rows (cpu_forward.hpp, aux_out). The random grids above are mostly too short for the box
// to hold whole vectors beyond that margin: here the rows are 100 model cells long, so the
// final state's PML strips along rows, and the PML slabs of the outer dimensions, come from that
// copy and are compared with the reference.
TEST_F(WaveKernels, LongRowsPmlStripsCopiedBack) {
  std::mt19937_64 rng(81);
  for (int ndim : {1, 2, 3})
    for (int accuracy : {4, 8}) {
      Shape s;
      s.ndim = ndim;
      s.accuracy = accuracy;
      s.nshots = 2;
      s.nt = 9;
      s.store_interval = 0;
      s.fixed_pml = 5;
      s.model_cells = {6, 6, 6};
      s.model_cells[static_cast<std::size_t>(ndim - 1)] = 100;
      compare_with_reference(RandomProblem<float>(rng, s), "long rows, " + describe(s));
      compare_with_reference(RandomProblem<double>(rng, s), "long rows, " + describe(s));
    }
}

TEST_F(WaveKernels, ThreeDimensional64Cubed) {
  if constexpr (!kTestingCuda)
    GTEST_SKIP() << "cuda's launch geometry at 64^3; the cpu backend's large 3-D grids are "
                    "ThreeDimensionalTilesAndWholePlanes";
  std::mt19937_64 rng(64);
  Shape s;
  s.ndim = 3;
  s.accuracy = 8;
  s.nshots = 2;
  s.nt = 20;
  s.store_interval = 2;
  s.fixed_pml = 8;
  s.model_cells = {40, 40, 40};  // padded 64 per dimension
  compare_with_reference(RandomProblem<float>(rng, s), "64^3");
  compare_with_reference(RandomProblem<double>(rng, s), "64^3");
}

TEST_F(WaveKernels, OneThreadEqualsTwoThreadsBitForBit) {
  if constexpr (kTestingCuda) GTEST_SKIP() << "thread counts are the cpu backend's";
  std::mt19937_64 rng(51);
  const int saved = omp_get_max_threads();
  for (int ndim : {1, 2, 3}) {
    Shape s;
    s.ndim = ndim;
    s.accuracy = 8;
    s.nshots = 3;
    s.store_interval = 2;
    s.nt = 9;
    s.max_model = ndim == 1 ? 2000 : ndim == 2 ? 40 : 12;  // 1D: several chunks per shot
    const RandomProblem<float> rp(rng, s);
    omp_set_num_threads(1);
    const auto f1 = run_forward<float>(kBackend, rp, rp.p, rp.initial);
    const auto b1 = run_backward<float>(kBackend, rp, rp.p, f1.stored);
    omp_set_num_threads(2);
    const auto f2 = run_forward<float>(kBackend, rp, rp.p, rp.initial);
    const auto b2 = run_backward<float>(kBackend, rp, rp.p, f2.stored);
    EXPECT_EQ(f1.state.u, f2.state.u);
    EXPECT_EQ(f1.state.u_prev, f2.state.u_prev);
    for (int d = 0; d < ndim; ++d) {
      EXPECT_EQ(f1.state.psi[d], f2.state.psi[d]);
      EXPECT_EQ(f1.state.zeta[d], f2.state.zeta[d]);
      EXPECT_EQ(b1.state.psi[d], b2.state.psi[d]);
      EXPECT_EQ(b1.state.zeta[d], b2.state.zeta[d]);
    }
    EXPECT_EQ(f1.receivers, f2.receivers);
    EXPECT_EQ(f1.stored, f2.stored);
    EXPECT_EQ(b1.state.u, b2.state.u);
    EXPECT_EQ(b1.state.u_prev, b2.state.u_prev);
    EXPECT_EQ(b1.grad_sources, b2.grad_sources);
    EXPECT_EQ(b1.grad_v, b2.grad_v);
  }
  omp_set_num_threads(saved);
}

// The cpu backend's tunables (ScalarCpuTuning) change its speed, never its results: temporal
// blocking of any depth (the last sweep shorter), tiles per thread, rows per 2-D block, shot
// batches and prefetch distance all give the bits of the defaults, with 1 and 2 threads, for
// shots run alone and shared (3 shots on 2 threads: two alone, one shared).
TEST_F(WaveKernels, CpuTuningChangesNoBit) {
  if constexpr (kTestingCuda) GTEST_SKIP() << "the tuning is the cpu backend's";
  std::mt19937_64 rng(71);
  const int saved = omp_get_max_threads();
  std::vector<ScalarCpuTuning> variants(7);
  variants[1].sweep_steps = 1;
  variants[2].sweep_steps = 3;
  variants[2].tiles_per_thread = 3;
  variants[3].sweep_steps = 5;
  variants[3].rows_per_block = 1;
  variants[3].prefetch_rows = 0;
  variants[4].sweep_steps = 2;
  variants[4].batch_bytes_per_thread = 1;
  variants[4].rows_per_block = 7;
  variants[5].sweep_cache_bytes = 1;  // 3-D: one step per sweep
  variants[6].sweep_steps = 20;       // longer than the run
  for (int ndim : {2, 3})
    for (int accuracy : {4, 8})
      for (int64_t nshots : {1, 3}) {
        Shape s;
        s.ndim = ndim;
        s.accuracy = accuracy;
        s.nshots = nshots;
        s.store_interval = 2;
        s.nt = 11;
        s.nsources = 3;
        s.nreceivers = 5;
        s.min_model = ndim == 2 ? 12 : 6;
        s.max_model = ndim == 2 ? 30 : 12;
        const RandomProblem<float> rp(rng, s);
        const std::string label = describe(s);
        omp_set_num_threads(2);
        const auto want = run_forward<float>(kBackend, rp, rp.p, rp.initial);
        const auto bwant = run_backward<float>(kBackend, rp, rp.p, want.stored);
        for (int threads : {1, 2})
          for (std::size_t k = 0; k < variants.size(); ++k) {
            omp_set_num_threads(threads);
            ScalarProblem<float> p = rp.p;
            p.cpu = variants[k];
            const auto got = run_forward<float>(kBackend, rp, p, rp.initial);
            const std::string what = label + ", variant " + std::to_string(k) + ", " +
                                     std::to_string(threads) + " threads";
            EXPECT_EQ(got.state.u, want.state.u) << what;
            EXPECT_EQ(got.state.u_prev, want.state.u_prev) << what;
            for (int d = 0; d < ndim; ++d) {
              EXPECT_EQ(got.state.psi[d], want.state.psi[d]) << what;
              EXPECT_EQ(got.state.zeta[d], want.state.zeta[d]) << what;
            }
            EXPECT_EQ(got.receivers, want.receivers) << what;
            EXPECT_EQ(got.stored, want.stored) << what;
            const auto bgot = run_backward<float>(kBackend, rp, p, want.stored);
            EXPECT_EQ(bgot.state.u, bwant.state.u) << what;
            EXPECT_EQ(bgot.grad_v, bwant.grad_v) << what;
            EXPECT_EQ(bgot.grad_sources, bwant.grad_sources) << what;
          }
        compare_with_reference(rp, label);
      }
  omp_set_num_threads(saved);
}

// <F x, y> = <x, F^T y> with x = (initial state, sources), y = (final-state gradient, receiver
// gradient): the backend's backward pass is the exact transpose of its forward pass, whatever
// the reference does. Bounds: 1e-13 of the sum of the magnitudes of the products, and 1e-11 of
// the value.
TEST_F(WaveKernels, BackwardIsTheTransposeOfForward) {
  std::mt19937_64 rng(61);
  for (int ndim : {1, 2, 3})
    for (int accuracy : {2, 8})
      for (int64_t nt : {7, 12}) {
        Shape s;
        s.ndim = ndim;
        s.accuracy = accuracy;
        s.nshots = 2;
        s.nt = nt;
        s.store_interval = 0;
        s.max_model = ndim == 3 ? 6 : 12;
        const RandomProblem<double> rp(rng, s);
        const auto f = run_forward<double>(kBackend, rp, rp.p, rp.initial);
        const auto b = run_backward<double>(kBackend, rp, rp.p, {});
        double magnitude = 0, forward_side = dot(f.receivers, rp.grad_receivers, &magnitude);
        auto fs = f.state, gf = rp.grad_final, x0 = rp.initial, bs = b.state;
        const auto fo = fs.arrays(ndim), yo = gf.arrays(ndim), xi = x0.arrays(ndim),
                   bi = bs.arrays(ndim);
        for (std::size_t k = 0; k < fo.size(); ++k) forward_side += dot(*fo[k], *yo[k], &magnitude);
        double backward_side = dot(b.grad_sources, rp.sources, &magnitude);
        for (std::size_t k = 0; k < xi.size(); ++k)
          backward_side += dot(*xi[k], *bi[k], &magnitude);
        const double error = std::abs(forward_side - backward_side);
        EXPECT_LE(error, 1e-13 * magnitude)
            << describe(s) << ": " << forward_side << " vs " << backward_side;
        EXPECT_LE(error, 1e-11 * std::abs(forward_side))
            << describe(s) << ": " << forward_side << " vs " << backward_side;
      }
}

// d/dv <F(x; v), y> along a random direction: central differences against <grad_v, dv>
// (store_interval 1, so the stored fields are exact), shared and batched v.
TEST_F(WaveKernels, VelocityGradientIsTheDerivative) {
  std::mt19937_64 rng(71);
  for (int ndim : {1, 2, 3})
    for (bool batched : {false, true}) {
      Shape s;
      s.ndim = ndim;
      s.accuracy = 4;
      s.nshots = 3;
      s.nt = 6;
      s.v_batched = batched;
      s.store_interval = 1;
      s.max_model = ndim == 3 ? 6 : 12;
      const RandomProblem<double> rp(rng, s);
      auto loss = [&](const std::vector<double>& v) {
        ScalarProblem<double> p = rp.p;
        p.v = v.data();
        auto f = run_forward<double>(kBackend, rp, p, rp.initial);
        double m = 0, l = dot(f.receivers, rp.grad_receivers, &m);
        auto gf = rp.grad_final;
        const auto fo = f.state.arrays(ndim), yo = gf.arrays(ndim);
        for (std::size_t k = 0; k < fo.size(); ++k) l += dot(*fo[k], *yo[k], &m);
        return l;
      };
      const auto f = run_forward<double>(kBackend, rp, rp.p, rp.initial);
      auto b = run_backward<double>(kBackend, rp, rp.p, f.stored);
      std::vector<double> dv(rp.v.size());
      std::uniform_real_distribution<double> uni(-1, 1);
      for (auto& e : dv) e = uni(rng);
      double m = 0, analytic = 0;
      for (std::size_t i = 0; i < dv.size(); ++i) {
        analytic += (b.grad_v[i] - rp.grad_v0[i]) * dv[i];
        m += std::abs((b.grad_v[i] - rp.grad_v0[i]) * dv[i]);
      }
      const double eps = 1e-4;
      std::vector<double> plus = rp.v, minus = rp.v;
      for (std::size_t i = 0; i < dv.size(); ++i) {
        plus[i] += eps * dv[i];
        minus[i] -= eps * dv[i];
      }
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_LE(std::abs(numeric - analytic), 1e-6 * m)
          << "ndim " << ndim << (batched ? " batched" : " shared") << ": " << numeric << " vs "
          << analytic;
    }
}

TEST_F(WaveKernels, BadDeviceIndexThrows) {
  if constexpr (!kTestingCuda) GTEST_SKIP() << "a device index means something on cuda only";
  std::mt19937_64 rng(1);
  const RandomProblem<float> rp(rng, Shape{});
  for (int index : {cuda_device_count(), -1}) {
    const Device bad{Backend::cuda, index, false};
    EXPECT_THROW(run_forward<float>(bad, rp, rp.p, rp.initial), DeviceUnavailable)
        << "device " << index;
    std::vector<float> stored(static_cast<std::size_t>(rp.nstored() * rp.p.nshots * rp.points));
    EXPECT_THROW(run_backward<float>(bad, rp, rp.p, stored), DeviceUnavailable)
        << "device " << index;
  }
}
