// C ABI: extern "C" wrappers that never throw. Each turns a sciproxy::Error into its code and
// keeps the message for sciproxy_last_error() on the calling thread.
#include "sciproxy/sciproxy.h"

#include <fmt/format.h>

#include <exception>
#include <new>
#include <string>
#include <vector>

#include "capi/guarded.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/version.hpp"
#include "sciproxy/stack.hpp"

namespace {

using sciproxy::capi::guarded;
using sciproxy::capi::require_pointer;

template <class T>
struct CInput {
  std::vector<std::span<const T>> spans;
  sciproxy::stack::ParstackInput<T> input;
};

template <class T>
CInput<T> make_input(const T* const* traces, const int64_t* lengths, int64_t ntraces,
                     const int32_t* offsets, const int32_t* shifts, const T* weights, int64_t nshifts) {
  sciproxy::require(ntraces >= 1, "ntraces", "at least 1", std::to_string(ntraces));
  sciproxy::require(nshifts >= 1, "nshifts", "at least 1", std::to_string(nshifts));
  require_pointer(traces, "traces");
  require_pointer(lengths, "lengths");
  require_pointer(offsets, "offsets");
  require_pointer(shifts, "shifts");
  CInput<T> c;
  c.spans.resize(static_cast<std::size_t>(ntraces));
  for (int64_t i = 0; i < ntraces; ++i) {
    sciproxy::require(lengths[i] >= 0, fmt::format("lengths[{}]", i), "a length >= 0",
                      std::to_string(lengths[i]));
    if (lengths[i] > 0) require_pointer(traces[i], "traces[i]");
    c.spans[i] = {traces[i], static_cast<std::size_t>(lengths[i])};
  }
  const auto nterms = static_cast<std::size_t>(ntraces * nshifts);
  c.input.traces = c.spans;
  c.input.offsets = {offsets, static_cast<std::size_t>(ntraces)};
  c.input.shifts = {shifts, nterms};
  if (weights) c.input.weights = {weights, nterms};
  c.input.nshifts = nshifts;
  return c;
}

template <class T>
sciproxy_status extent_impl(const T* const* traces, const int64_t* lengths, int64_t ntraces,
                            const int32_t* offsets, const int32_t* shifts, int64_t nshifts,
                            int32_t* offsetout, int64_t* lengthout) {
  return guarded([&] {
    require_pointer(offsetout, "offsetout");
    require_pointer(lengthout, "lengthout");
    CInput<T> c = make_input<T>(traces, lengths, ntraces, offsets, shifts, nullptr, nshifts);
    // Weights do not shape the window; unit weights let the shared checks run.
    std::vector<T> ones(static_cast<std::size_t>(ntraces * nshifts), T(1));
    c.input.weights = ones;
    sciproxy::stack::ParstackOptions opt;
    opt.lengthout = *lengthout;
    opt.offsetout = *offsetout;
    const auto e = sciproxy::stack::parstack_extent(c.input, opt);
    *offsetout = e.offsetout;
    *lengthout = e.lengthout;
  });
}

template <class T>
sciproxy_status parstack_impl(const T* const* traces, const int64_t* lengths, int64_t ntraces,
                              const int32_t* offsets, const int32_t* shifts, const T* weights,
                              int64_t nshifts, int method, int32_t* offsetout, int64_t* lengthout,
                              T* result, int64_t result_size, int accumulate, int clamp_max_at_zero,
                              int nparallel, const char* device) {
  return guarded([&] {
    require_pointer(weights, "weights");
    require_pointer(offsetout, "offsetout");
    require_pointer(lengthout, "lengthout");
    require_pointer(result, "result");
    require_pointer(device, "device");
    sciproxy::require(method == 0 || method == 1, "method", "0 (stack) or 1 (maximum of the stack)",
                      std::to_string(method));
    sciproxy::require(result_size >= 0, "result_size", "a size >= 0", std::to_string(result_size));
    const CInput<T> c = make_input<T>(traces, lengths, ntraces, offsets, shifts, weights, nshifts);
    sciproxy::stack::ParstackOptions opt;
    opt.method = static_cast<sciproxy::stack::Method>(method);
    opt.lengthout = *lengthout;
    opt.offsetout = *offsetout;
    opt.accumulate = accumulate != 0;
    opt.clamp_max_at_zero = clamp_max_at_zero != 0;
    opt.nparallel = nparallel > 0 ? nparallel : 0;
    const auto dev = sciproxy::select_device(device);
    const auto e = sciproxy::stack::parstack<T>(dev, c.input, {result, static_cast<std::size_t>(result_size)}, opt);
    *offsetout = e.offsetout;
    *lengthout = e.lengthout;
  });
}

template <class T>
sciproxy_status argmax_impl(const T* a, int64_t rows, int64_t cols, uint32_t* out, int nparallel,
                            int pyrocko_compat) {
  return guarded([&] {
    require_pointer(a, "a");
    require_pointer(out, "out");
    sciproxy::require(rows >= 1 && cols >= 1, "rows, cols", "both at least 1", fmt::format("{}, {}", rows, cols));
    sciproxy::stack::argmax<T>({a, static_cast<std::size_t>(rows * cols)}, rows, cols,
                               {out, static_cast<std::size_t>(cols)}, nparallel > 0 ? nparallel : 0,
                               pyrocko_compat != 0);
  });
}

thread_local std::string last_error;

}  // namespace

void sciproxy::capi::set_last_error(const std::string& message) { last_error = message; }

extern "C" {

const char* sciproxy_last_error(void) { return last_error.c_str(); }
const char* sciproxy_version(void) { return sciproxy::build_info().version.c_str(); }

sciproxy_status sciproxy_parstack_extent_f64(const double* const* traces, const int64_t* lengths,
                                             int64_t ntraces, const int32_t* offsets,
                                             const int32_t* shifts, int64_t nshifts,
                                             int32_t* offsetout, int64_t* lengthout) {
  return extent_impl(traces, lengths, ntraces, offsets, shifts, nshifts, offsetout, lengthout);
}
sciproxy_status sciproxy_parstack_extent_f32(const float* const* traces, const int64_t* lengths,
                                             int64_t ntraces, const int32_t* offsets,
                                             const int32_t* shifts, int64_t nshifts,
                                             int32_t* offsetout, int64_t* lengthout) {
  return extent_impl(traces, lengths, ntraces, offsets, shifts, nshifts, offsetout, lengthout);
}

sciproxy_status sciproxy_parstack_f64(const double* const* traces, const int64_t* lengths,
                                      int64_t ntraces, const int32_t* offsets,
                                      const int32_t* shifts, const double* weights, int64_t nshifts,
                                      int method, int32_t* offsetout, int64_t* lengthout,
                                      double* result, int64_t result_size, int accumulate,
                                      int clamp_max_at_zero, int nparallel, const char* device) {
  return parstack_impl(traces, lengths, ntraces, offsets, shifts, weights, nshifts, method, offsetout,
                       lengthout, result, result_size, accumulate, clamp_max_at_zero, nparallel, device);
}
sciproxy_status sciproxy_parstack_f32(const float* const* traces, const int64_t* lengths,
                                      int64_t ntraces, const int32_t* offsets,
                                      const int32_t* shifts, const float* weights, int64_t nshifts,
                                      int method, int32_t* offsetout, int64_t* lengthout,
                                      float* result, int64_t result_size, int accumulate,
                                      int clamp_max_at_zero, int nparallel, const char* device) {
  return parstack_impl(traces, lengths, ntraces, offsets, shifts, weights, nshifts, method, offsetout,
                       lengthout, result, result_size, accumulate, clamp_max_at_zero, nparallel, device);
}

sciproxy_status sciproxy_argmax_f64(const double* a, int64_t rows, int64_t cols, uint32_t* out,
                                    int nparallel, int pyrocko_compat) {
  return argmax_impl(a, rows, cols, out, nparallel, pyrocko_compat);
}
sciproxy_status sciproxy_argmax_f32(const float* a, int64_t rows, int64_t cols, uint32_t* out,
                                    int nparallel, int pyrocko_compat) {
  return argmax_impl(a, rows, cols, out, nparallel, pyrocko_compat);
}

}  // extern "C"
