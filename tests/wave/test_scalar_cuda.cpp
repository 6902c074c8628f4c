// cuda backend of the scalar propagator against the cpu backend, on problems built directly as
// kernels::ScalarProblem: small padded grids (zero halos) with random C-PML profiles that vanish
// inside pml_interior, ndim 1..3, accuracy 2..8, float and double, shared and batched models,
// forward (state, receivers, stored) and adjoint (state, source and model gradients) outputs;
// the storage streamed through the host; a 3D 64^3 problem; the adjoint identity of the cuda
// backend alone; a bad device index. Every test skips without a GPU.
// Tolerance: ||cuda - cpu|| / ||cpu|| <= 1e-5 (float32), 1e-12 (float64).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "wave/kernels.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace sciproxy::wave::kernels;

namespace {

// The Context of a direct call of a cuda kernel on device `index`.
Context on_cuda(int index, Timers* timers = nullptr) {
  return Context{Device{Backend::cuda, index, false}, timers};
}

class ScalarCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

struct Shape {
  int ndim = 2;
  int accuracy = 4;
  std::int64_t nshots = 2;
  bool v_batched = false;
  std::int64_t nt = 16;
  std::int64_t store_interval = 1;
  int min_model = 3, max_model = 7;  // model cells per dimension
  int max_pml = 4;                   // PML cells per side: 0 .. max_pml
  int fixed_pml = -1;                // >= 0: every side gets this many
  int nsources = -1, nreceivers = -1;  // -1: random (sources 1..3, receivers 0..5)
};

// Everything a call needs, owned here; p points into the vectors (not copyable).
template <class T>
struct Case {
  ScalarProblem<T> p;
  std::vector<T> v;
  std::array<std::vector<T>, kMaxDims> a, b, dbdx;
  std::vector<std::int64_t> source_cells, receiver_cells;
  std::vector<T> sources;  // [nt, nshots, nsources]
  std::array<std::int64_t, kMaxDims> pml_lo{}, pml_hi{}, model{};

  Case(std::mt19937_64& rng, const Shape& s) {
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
    auto integer = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    p.ndim = s.ndim;
    p.accuracy = s.accuracy;
    p.nshots = s.nshots;
    p.v_batched = s.v_batched;
    p.nt = s.nt;
    p.store_interval = s.store_interval;
    const std::int64_t h = s.accuracy / 2;
    double sum_rdx2 = 0;
    for (int d = 0; d < s.ndim; ++d) {
      pml_lo[d] = s.fixed_pml >= 0 ? s.fixed_pml : integer(0, s.max_pml);
      pml_hi[d] = s.fixed_pml >= 0 ? s.fixed_pml : integer(0, s.max_pml);
      model[d] = integer(s.min_model, s.max_model);
      const std::int64_t n = 2 * h + pml_lo[d] + model[d] + pml_hi[d];
      p.n[d] = n;
      const double dx = uniform(0.8, 1.25);
      p.rdx[d] = static_cast<T>(1 / dx);
      p.rdx2[d] = static_cast<T>(1 / (dx * dx));
      sum_rdx2 += 1 / (dx * dx);
      // Profiles in the PML cells only (a in (0, 1), b < 0 as the C-PML makes them).
      a[d].assign(n, T(0));
      b[d].assign(n, T(0));
      dbdx[d].assign(n, T(0));
      for (std::int64_t x = h; x < n - h; ++x) {
        if (x >= h + pml_lo[d] && x < n - h - pml_hi[d]) continue;
        a[d][x] = static_cast<T>(uniform(0.3, 0.95));
        b[d][x] = static_cast<T>(uniform(-0.6, -0.01));
        dbdx[d][x] = static_cast<T>(uniform(-0.5, 0.5) / dx);
      }
      // Where the profiles of every stencil neighbour vanish too.
      std::int64_t lo = pml_lo[d] > 0 ? h + pml_lo[d] + h : 0;
      std::int64_t hi = pml_hi[d] > 0 ? n - h - pml_hi[d] - h : n;
      if (lo > hi) lo = hi = h;
      p.pml_interior[2 * d] = lo;
      p.pml_interior[2 * d + 1] = hi;
    }
    const std::int64_t points = p.points();
    v.resize(static_cast<std::size_t>((s.v_batched ? s.nshots : 1) * points));
    for (auto& x : v) x = static_cast<T>(uniform(0.8, 1.2));
    const double dt = 0.5 / (1.2 * std::sqrt(sum_rdx2));  // CFL number 0.5
    p.dt2 = static_cast<T>(dt * dt);

    p.nsources = s.nsources >= 0 ? s.nsources : integer(1, 3);
    p.nreceivers = s.nreceivers >= 0 ? s.nreceivers : integer(0, 5);
    auto random_cell = [&]() {
      std::int64_t flat = 0;
      for (int d = 0; d < kMaxDims; ++d) {
        const std::int64_t c = d < s.ndim ? h + pml_lo[d] + integer(0, static_cast<int>(model[d]) - 1) : 0;
        flat = flat * p.n[d] + c;
      }
      return flat;
    };
    for (std::int64_t shot = 0; shot < s.nshots; ++shot) {
      const std::size_t first = source_cells.size();
      for (std::int64_t k = 0; k < p.nsources; ++k) {
        std::int64_t c = random_cell();
        // Distinct per shot (two sources in one cell are an error upstream).
        for (int tries = 0; tries < 100 && std::find(source_cells.begin() + static_cast<std::ptrdiff_t>(first),
                                                     source_cells.end(), c) != source_cells.end();
             ++tries)
          c = random_cell();
        source_cells.push_back(c);
      }
      // Receivers may share a cell: the second repeats the first.
      for (std::int64_t k = 0; k < p.nreceivers; ++k)
        receiver_cells.push_back(k == 1 ? receiver_cells.back() : random_cell());
    }
    sources.resize(static_cast<std::size_t>(p.nt * p.nshots * p.nsources));
    for (auto& x : sources) x = static_cast<T>(unit(rng));

    p.v = v.data();
    for (int d = 0; d < s.ndim; ++d) {
      p.a[d] = a[d].data();
      p.b[d] = b[d].data();
      p.dbdx[d] = dbdx[d].data();
    }
    p.source_cells = source_cells.data();
    p.receiver_cells = receiver_cells.data();
  }
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  std::int64_t field_size() const { return p.nshots * p.points(); }
  std::int64_t nsnapshots() const {
    return p.store_interval > 0 ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  }
  std::int64_t model_size() const { return (p.v_batched ? p.nshots : 1) * p.points(); }
  // Whether flat cell i lies in the halo, and its coordinate along d.
  std::int64_t coordinate(std::int64_t i, int d) const {
    std::int64_t stride = 1;
    for (int e = d + 1; e < kMaxDims; ++e) stride *= p.n[e];
    return (i / stride) % p.n[d];
  }
  bool in_halo(std::int64_t i) const {
    const std::int64_t h = p.accuracy / 2;
    for (int d = 0; d < p.ndim; ++d) {
      const std::int64_t x = coordinate(i, d);
      if (x < h || x >= p.n[d] - h) return true;
    }
    return false;
  }
};

// A state (or the gradient with respect to one): random outside the halo; psi and zeta of
// dimension d only where the profile a of d is non-zero.
template <class T>
struct State {
  std::vector<T> u, u_prev;
  std::array<std::vector<T>, kMaxDims> psi, zeta;

  State(const Case<T>& c, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    const auto n = static_cast<std::size_t>(c.field_size());
    const std::int64_t points = c.p.points();
    u.assign(n, T(0));
    u_prev.assign(n, T(0));
    for (int d = 0; d < c.p.ndim; ++d) {
      psi[d].assign(n, T(0));
      zeta[d].assign(n, T(0));
    }
    for (std::int64_t shot = 0; shot < c.p.nshots; ++shot)
      for (std::int64_t i = 0; i < points; ++i) {
        if (c.in_halo(i)) continue;
        const auto j = static_cast<std::size_t>(shot * points + i);
        u[j] = static_cast<T>(unit(rng));
        u_prev[j] = static_cast<T>(unit(rng));
        for (int d = 0; d < c.p.ndim; ++d)
          if (c.a[d][static_cast<std::size_t>(c.coordinate(i, d))] != T(0)) {
            psi[d][j] = static_cast<T>(unit(rng));
            zeta[d][j] = static_cast<T>(unit(rng));
          }
      }
  }

  ScalarFields<T> fields() {
    ScalarFields<T> f;
    f.u = u.data();
    f.u_prev = u_prev.data();
    for (int d = 0; d < kMaxDims; ++d) {
      f.psi[d] = psi[d].empty() ? nullptr : psi[d].data();
      f.zeta[d] = zeta[d].empty() ? nullptr : zeta[d].data();
    }
    return f;
  }
};

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  const auto c = compare<T, T>(got, want, {tolerance<T>()});
  EXPECT_TRUE(c.pass) << what << ": " << c.summary();
}

template <class T>
void expect_states_close(const Case<T>& c, const State<T>& got, const State<T>& want, const std::string& what) {
  expect_close(got.u, want.u, what + " u");
  expect_close(got.u_prev, want.u_prev, what + " u_prev");
  for (int d = 0; d < c.p.ndim; ++d) {
    expect_close(got.psi[d], want.psi[d], what + " psi" + std::to_string(d));
    expect_close(got.zeta[d], want.zeta[d], what + " zeta" + std::to_string(d));
  }
}

// Forward and adjoint of cuda and cpu on one problem: the adjoint of both from the cpu's stored
// snapshots, so that each pass is compared on its own.
template <class T>
void compare_with_cpu(std::mt19937_64& rng, const Shape& shape, const std::string& label) {
  const Case<T> c(rng, shape);
  const auto& p = c.p;
  const std::string what = label + " (ndim " + std::to_string(p.ndim) + ", accuracy " +
                           std::to_string(p.accuracy) + ", shots " + std::to_string(p.nshots) +
                           (p.v_batched ? ", batched v" : "") + ")";
  const State<T> initial(c, rng);
  State<T> want = initial, got = initial;
  const auto nrec = static_cast<std::size_t>(p.nt * p.nshots * p.nreceivers);
  const auto nstored = static_cast<std::size_t>(c.nsnapshots() * c.field_size());
  std::vector<T> rec_want(nrec), rec_got(nrec, T(-7)), stored_want(nstored, T(0)), stored_got(nstored, T(0));
  cpu::scalar_forward<T>(Context{}, p, want.fields(), c.sources.data(), rec_want.data(), stored_want.data());
  Timers timers;
  cuda::scalar_forward<T>(on_cuda(0, &timers), p, got.fields(), c.sources.data(), rec_got.data(), stored_got.data());
  expect_states_close(c, got, want, what + " forward");
  expect_close(rec_got, rec_want, what + " receivers");
  expect_close(stored_got, stored_want, what + " stored");
  for (const char* region : {"upload", "steps", "download"})
    EXPECT_NE(timers.find(region), nullptr) << "timer region " << region;

  const State<T> grad_final(c, rng);
  State<T> gwant = grad_final, ggot = grad_final;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<T> grad_rec(nrec);
  for (auto& x : grad_rec) x = static_cast<T>(unit(rng));
  const auto nsrc = static_cast<std::size_t>(p.nt * p.nshots * p.nsources);
  std::vector<T> gsrc_want(nsrc), gsrc_got(nsrc, T(-7));
  std::vector<T> gv_want(static_cast<std::size_t>(c.model_size()));
  for (auto& x : gv_want) x = static_cast<T>(unit(rng));  // accumulated into
  std::vector<T> gv_got = gv_want;
  cpu::scalar_backward<T>(Context{}, p, gwant.fields(), grad_rec.data(), gsrc_want.data(), stored_want.data(), gv_want.data());
  cuda::scalar_backward<T>(on_cuda(0), p, ggot.fields(), grad_rec.data(), gsrc_got.data(), stored_want.data(),
                           gv_got.data());
  expect_states_close(c, ggot, gwant, what + " adjoint");
  expect_close(gsrc_got, gsrc_want, what + " grad_sources");
  expect_close(gv_got, gv_want, what + " grad_v");
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

double dot(const std::vector<double>& x, const std::vector<double>& y) {
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

double state_dot(const Case<double>& c, const State<double>& x, const State<double>& y) {
  double s = dot(x.u, y.u) + dot(x.u_prev, y.u_prev);
  for (int d = 0; d < c.p.ndim; ++d) s += dot(x.psi[d], y.psi[d]) + dot(x.zeta[d], y.zeta[d]);
  return s;
}

}  // namespace

TEST_F(ScalarCuda, MatchesCpuOnRandomProblems) {
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
        compare_with_cpu<float>(rng, s, "float trial " + std::to_string(trial));
        compare_with_cpu<double>(rng, s, "double trial " + std::to_string(trial));
      }
}

TEST_F(ScalarCuda, NoSourcesReceiversOrStorage) {
  std::mt19937_64 rng(5);
  Shape s;
  s.nsources = 0;
  s.nreceivers = 0;
  s.store_interval = 0;
  compare_with_cpu<double>(rng, s, "nothing in or out");
  s.ndim = 3;
  s.nsources = 2;
  s.nreceivers = 4;
  s.fixed_pml = 0;  // no PML at all: the interior box is everything
  compare_with_cpu<float>(rng, s, "no PML");
}

// Storage that does not fit: snapshots stream through the ring (more snapshots than slots).
TEST_F(ScalarCuda, StreamedStorageMatchesCpu) {
  const ScopedEnv limit("SCIPROXY_WAVE_CUDA_STORAGE_LIMIT", "0");
  std::mt19937_64 rng(11);
  for (int ndim = 2; ndim <= 3; ++ndim)
    for (std::int64_t interval : {1, 3}) {
      Shape s;
      s.ndim = ndim;
      s.accuracy = 4 + 2 * (ndim - 2);
      s.nshots = 3;
      s.v_batched = interval == 3;
      s.nt = 20;
      s.store_interval = interval;
      compare_with_cpu<float>(rng, s, "streamed storage");
      compare_with_cpu<double>(rng, s, "streamed storage");
    }
}

TEST_F(ScalarCuda, ThreeDimensional64Cubed) {
  std::mt19937_64 rng(64);
  Shape s;
  s.ndim = 3;
  s.accuracy = 8;
  s.nshots = 2;
  s.nt = 20;
  s.store_interval = 2;
  s.fixed_pml = 8;
  s.min_model = s.max_model = 64 - 2 * 8 - 8;  // padded 64 per dimension
  compare_with_cpu<float>(rng, s, "64^3");
  compare_with_cpu<double>(rng, s, "64^3");
}

// The cuda adjoint alone is the transpose of the cuda forward (linear in the initial state and
// the sources for a fixed model): <F x, y> = <x, F^T y>.
TEST_F(ScalarCuda, AdjointIdentity) {
  std::mt19937_64 rng(3);
  for (int ndim = 1; ndim <= 3; ++ndim)
    for (int accuracy : {2, 8}) {
      Shape s;
      s.ndim = ndim;
      s.accuracy = accuracy;
      s.nshots = 2;
      s.nt = 12;
      s.store_interval = 0;
      const Case<double> c(rng, s);
      const auto& p = c.p;
      const State<double> x(c, rng), y(c, rng);
      State<double> fx = x, fty = y;
      std::uniform_real_distribution<double> unit(-1.0, 1.0);
      std::vector<double> rec(static_cast<std::size_t>(p.nt * p.nshots * p.nreceivers)), grad_rec(rec.size());
      for (auto& r : grad_rec) r = unit(rng);
      std::vector<double> grad_src(c.sources.size());
      cuda::scalar_forward<double>(on_cuda(0), p, fx.fields(), c.sources.data(), rec.data(), nullptr);
      cuda::scalar_backward<double>(on_cuda(0), p, fty.fields(), grad_rec.data(), grad_src.data(), nullptr, nullptr);
      const double lhs = state_dot(c, fx, y) + dot(rec, grad_rec);
      const double rhs = state_dot(c, x, fty) + dot(c.sources, grad_src);
      EXPECT_NEAR(lhs, rhs, 1e-11 * std::abs(lhs)) << "ndim " << ndim << " accuracy " << accuracy;
    }
}

TEST_F(ScalarCuda, BadDeviceIndexThrows) {
  std::mt19937_64 rng(1);
  const Case<float> c(rng, Shape{});
  State<float> st(c, rng);
  std::vector<float> rec(static_cast<std::size_t>(c.p.nt * c.p.nshots * c.p.nreceivers));
  std::vector<float> stored(static_cast<std::size_t>(c.nsnapshots() * c.field_size()));
  std::vector<float> gsrc(c.sources.size()), gv(static_cast<std::size_t>(c.model_size()));
  for (int index : {cuda_device_count(), -1}) {
    EXPECT_THROW(cuda::scalar_forward<float>(on_cuda(index), c.p, st.fields(), c.sources.data(), rec.data(),
                                             stored.data()),
                 DeviceUnavailable)
        << "device " << index;
    EXPECT_THROW(cuda::scalar_backward<float>(on_cuda(index), c.p, st.fields(), rec.data(), gsrc.data(),
                                              stored.data(), gv.data()),
                 DeviceUnavailable)
        << "device " << index;
  }
}
