// Band-limited resampling of traces and its adjoint with FFTW3; the method is in resample.hpp.
#include "resample.hpp"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <numbers>
#include <vector>

#include "core/cancel_region.hpp"

namespace sciproxy::wave::detail {

namespace {

// FFTW's planner is not thread-safe; execution of distinct plans is.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

// y = irfft_M(d * rfft_N(x)) with orthonormal transforms; d real, of length K <= min(N, M)/2 + 1.
class SpectralMap {
 public:
  SpectralMap(std::int64_t n_in, std::int64_t n_out, std::vector<double> d)
      : n_in_(n_in), n_out_(n_out), d_(std::move(d)) {
    std::lock_guard<std::mutex> lock(planner_mutex());
    in_ = fftw_alloc_real(static_cast<std::size_t>(n_in_));
    out_ = fftw_alloc_real(static_cast<std::size_t>(n_out_));
    spec_in_ = fftw_alloc_complex(static_cast<std::size_t>(n_in_ / 2 + 1));
    spec_out_ = fftw_alloc_complex(static_cast<std::size_t>(n_out_ / 2 + 1));
    if (in_ && out_ && spec_in_ && spec_out_) {
      r2c_ = fftw_plan_dft_r2c_1d(static_cast<int>(n_in_), in_, spec_in_, FFTW_ESTIMATE);
      c2r_ = fftw_plan_dft_c2r_1d(static_cast<int>(n_out_), spec_out_, out_, FFTW_ESTIMATE);
    }
    if (!r2c_ || !c2r_) {
      release();
      throw std::bad_alloc();
    }
  }
  ~SpectralMap() {
    std::lock_guard<std::mutex> lock(planner_mutex());
    release();
  }
  SpectralMap(const SpectralMap&) = delete;
  SpectralMap& operator=(const SpectralMap&) = delete;

  double* input() { return in_; }
  const double* output() const { return out_; }

  // in_ -> out_
  void apply() {
    fftw_execute(r2c_);
    const double scale = 1.0 / std::sqrt(static_cast<double>(n_in_) * static_cast<double>(n_out_));
    const std::int64_t nbins_out = n_out_ / 2 + 1;
    const std::int64_t kept =
        std::min<std::int64_t>(static_cast<std::int64_t>(d_.size()), nbins_out);
    for (std::int64_t k = 0; k < nbins_out; ++k) {
      const double g = k < kept ? d_[k] * scale : 0.0;
      spec_out_[k][0] = k < kept ? g * spec_in_[k][0] : 0.0;  // spec_in_ has only n_in/2 + 1 bins
      spec_out_[k][1] = k < kept ? g * spec_in_[k][1] : 0.0;
    }
    // irfft uses only the real parts of the DC and Nyquist bins.
    spec_out_[0][1] = 0;
    if (n_out_ % 2 == 0) spec_out_[n_out_ / 2][1] = 0;
    fftw_execute(c2r_);
  }

 private:
  void release() {
    if (r2c_) fftw_destroy_plan(r2c_);
    if (c2r_) fftw_destroy_plan(c2r_);
    fftw_free(in_);
    fftw_free(out_);
    fftw_free(spec_in_);
    fftw_free(spec_out_);
    r2c_ = c2r_ = nullptr;
    in_ = out_ = nullptr;
    spec_in_ = spec_out_ = nullptr;
  }

  std::int64_t n_in_, n_out_;
  std::vector<double> d_;
  double* in_ = nullptr;
  double* out_ = nullptr;
  fftw_complex* spec_in_ = nullptr;
  fftw_complex* spec_out_ = nullptr;
  fftw_plan r2c_ = nullptr;
  fftw_plan c2r_ = nullptr;
};

// Multiplicity of bin k in a real signal of length n: 1 for DC and Nyquist, else 2.
double bin_weight(std::int64_t k, std::int64_t n) {
  return k == 0 || (n % 2 == 0 && 2 * k == n) ? 1.0 : 2.0;
}

// The transpose of SpectralMap(n_in, n_out, d) is SpectralMap(n_out, n_in, adjoint_gains(d, ...)).
std::vector<double> adjoint_gains(std::vector<double> d, std::int64_t n_in, std::int64_t n_out) {
  for (std::size_t k = 0; k < d.size(); ++k) {
    const auto kk = static_cast<std::int64_t>(k);
    d[k] *= bin_weight(kk, n_out) / bin_weight(kk, n_in);
  }
  return d;
}

// Deepwave's cosine_taper_end over the bins, then the zeroed Nyquist bin of a length-n signal.
std::vector<double> gains(std::int64_t nbins, double freq_taper_frac, std::int64_t n,
                          double factor) {
  std::vector<double> d(static_cast<std::size_t>(nbins), factor);
  if (freq_taper_frac > 0) {
    const auto ntaper =
        std::min(static_cast<std::int64_t>(freq_taper_frac * static_cast<double>(nbins)), nbins);
    for (std::int64_t j = 1; j <= ntaper; ++j)
      d[nbins - ntaper + j - 1] *=
          (std::cos(static_cast<double>(j) / static_cast<double>(ntaper) * std::numbers::pi) + 1) /
          2;
  }
  if (n % 2 == 0 && nbins > 1) d[nbins - 1] = 0;
  return d;
}

// torch.hann_window(n, periodic=False)
std::vector<double> hann(std::int64_t n) {
  std::vector<double> w(static_cast<std::size_t>(n), 1.0);
  if (n > 1)
    for (std::int64_t i = 0; i < n; ++i)
      w[i] = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * static_cast<double>(i) /
                                  static_cast<double>(n - 1));
  return w;
}

std::int64_t time_padding(double time_pad_frac, std::int64_t nt) {
  return time_pad_frac > 0 ? static_cast<std::int64_t>(time_pad_frac * static_cast<double>(nt)) : 0;
}

template <class T>
void copy(const T* x, std::int64_t count, T* y) {
  std::copy(x, x + count, y);
}

// Runs y = irfft_{n_out}(d * rfft_{n_in}(x)) on every trace: in[j] for j < in_len (window w_in,
// zero beyond), out[j] for j < out_len (window w_out). Empty windows mean 1. The traces are shared
// among the OpenMP threads, each with its own map (plans and buffers), when there are enough of
// them to outweigh planning a map per thread.
template <class T>
void run(std::int64_t n_in, std::int64_t n_out, const std::vector<double>& d, const T* in,
         std::int64_t in_len, const std::vector<double>& w_in, T* out, std::int64_t out_len,
         const std::vector<double>& w_out, std::int64_t ntraces) {
  const bool parallel = ntraces >= 16 && ntraces * (n_in + n_out) >= (std::int64_t(1) << 20);
  std::exception_ptr failure;
  RegionStop stop;  // between traces (one trace's transform is not interruptible)
#pragma omp parallel if (parallel)
  {
    std::unique_ptr<SpectralMap> map;
    try {
      map = std::make_unique<SpectralMap>(n_in, n_out, d);
    } catch (...) {
#pragma omp critical(sciproxy_resample_failure)
      failure = std::current_exception();
    }
#pragma omp for schedule(static)
    for (std::int64_t tr = 0; tr < ntraces; ++tr) {
      if (!map || stop.poll(tr)) continue;
      double* buf = map->input();
      const T* src = in + tr * in_len;
      for (std::int64_t j = 0; j < in_len; ++j)
        buf[j] = static_cast<double>(src[j]) * (w_in.empty() ? 1.0 : w_in[j]);
      std::fill(buf + in_len, buf + n_in, 0.0);
      map->apply();
      const double* res = map->output();
      T* dst = out + tr * out_len;
      for (std::int64_t j = 0; j < out_len; ++j)
        dst[j] = static_cast<T>(res[j] * (w_out.empty() ? 1.0 : w_out[j]));
    }
  }
  if (failure) std::rethrow_exception(failure);
  stop.throw_if_stopped("resampling", ntraces, "traces");
}

}  // namespace

template <class T>
void upsample(const T* x, std::int64_t ntraces, std::int64_t nt, const Resampling& r, T* y) {
  if (ntraces == 0 || nt == 0) return;
  if (r.step_ratio == 1) return copy(x, ntraces * nt, y);
  const std::int64_t n = nt + time_padding(r.time_pad_frac, nt), m = n * r.step_ratio;
  const auto d =
      gains(n / 2 + 1, r.freq_taper_frac, n, std::sqrt(static_cast<double>(r.step_ratio)));
  const std::int64_t len = nt * r.step_ratio;
  run(n, m, d, x, nt, {}, y, len, r.time_taper ? hann(len) : std::vector<double>{}, ntraces);
}

template <class T>
void upsample_adjoint(const T* y, std::int64_t ntraces, std::int64_t nt, const Resampling& r,
                      T* x) {
  if (ntraces == 0 || nt == 0) return;
  if (r.step_ratio == 1) return copy(y, ntraces * nt, x);
  const std::int64_t n = nt + time_padding(r.time_pad_frac, nt), m = n * r.step_ratio;
  const auto d = adjoint_gains(
      gains(n / 2 + 1, r.freq_taper_frac, n, std::sqrt(static_cast<double>(r.step_ratio))), n, m);
  const std::int64_t len = nt * r.step_ratio;
  run(m, n, d, y, len, r.time_taper ? hann(len) : std::vector<double>{}, x, nt, {}, ntraces);
}

template <class T>
void downsample(const T* x, std::int64_t ntraces, std::int64_t nt, const Resampling& r, T* y) {
  if (ntraces == 0 || nt == 0) return;
  if (r.step_ratio == 1) return copy(x, ntraces * nt, y);
  const std::int64_t m = nt + time_padding(r.time_pad_frac, nt), n = m * r.step_ratio;
  const auto d =
      gains(m / 2 + 1, r.freq_taper_frac, m, 1.0 / std::sqrt(static_cast<double>(r.step_ratio)));
  const std::int64_t len = nt * r.step_ratio;
  run(n, m, d, x, len, r.time_taper ? hann(len) : std::vector<double>{}, y, nt, {}, ntraces);
}

template <class T>
void downsample_adjoint(const T* y, std::int64_t ntraces, std::int64_t nt, const Resampling& r,
                        T* x) {
  if (ntraces == 0 || nt == 0) return;
  if (r.step_ratio == 1) return copy(y, ntraces * nt, x);
  const std::int64_t m = nt + time_padding(r.time_pad_frac, nt), n = m * r.step_ratio;
  const auto d = adjoint_gains(
      gains(m / 2 + 1, r.freq_taper_frac, m, 1.0 / std::sqrt(static_cast<double>(r.step_ratio))), n,
      m);
  const std::int64_t len = nt * r.step_ratio;
  run(m, n, d, y, nt, {}, x, len, r.time_taper ? hann(len) : std::vector<double>{}, ntraces);
}

#define SCIPROXY_INSTANTIATE(T)                                                                   \
  template void upsample<T>(const T*, std::int64_t, std::int64_t, const Resampling&, T*);         \
  template void upsample_adjoint<T>(const T*, std::int64_t, std::int64_t, const Resampling&, T*); \
  template void downsample<T>(const T*, std::int64_t, std::int64_t, const Resampling&, T*);       \
  template void downsample_adjoint<T>(const T*, std::int64_t, std::int64_t, const Resampling&, T*);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::wave::detail
