// C ABI of the scalar propagator: extern "C" wrappers over sciproxy::wave::scalar and
// scalar_gradient that never throw. Errors become a sciproxy_status and a message for
// sciproxy_last_error() on the calling thread, as for parstack (capi.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <span>
#include <string>

#include "capi/guarded.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"
#include "sciproxy/wave.hpp"

namespace {

namespace wv = sciproxy::wave;
using sciproxy::capi::guarded;
using sciproxy::capi::checked_product;
using sciproxy::capi::input_span;
using sciproxy::capi::optional_span;
using sciproxy::capi::require_pointer;

// The arguments every call shares, checked enough to size the arrays; the library checks values.
template <class T>
wv::ScalarInput<T> make_input(int ndim, const int64_t* shape, const double* spacing, const T* v,
                              int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                              int64_t nsources, int64_t nreceivers, const T* amplitudes,
                              const int64_t* source_locations, const int64_t* receiver_locations) {
  sciproxy::require(ndim >= 1 && ndim <= wv::kMaxDims, "ndim", "1, 2 or 3", std::to_string(ndim));
  require_pointer(shape, "shape");
  require_pointer(spacing, "spacing");
  sciproxy::require(nt >= 1, "nt", "at least 1 time sample", std::to_string(nt));
  sciproxy::require(nshots >= 1, "nshots", "at least 1", std::to_string(nshots));
  sciproxy::require(nsources >= 0, "nsources", "0 or more", std::to_string(nsources));
  sciproxy::require(nreceivers >= 0, "nreceivers", "0 or more", std::to_string(nreceivers));
  sciproxy::require(nmodels == 1 || nmodels == nshots, "nmodels",
                    fmt::format("1 or nshots ({})", nshots), std::to_string(nmodels));
  wv::ScalarInput<T> in;
  in.grid.ndim = ndim;
  std::int64_t cells = 1;
  for (int d = 0; d < ndim; ++d) {
    sciproxy::require(shape[d] >= 1, fmt::format("shape[{}]", d), "at least 1 cell",
                      std::to_string(shape[d]));
    in.grid.shape[d] = shape[d];
    in.grid.spacing[d] = spacing[d];
    cells = checked_product(cells, shape[d], "shape");
  }
  in.v = input_span(v, checked_product(nmodels, cells, "v"), "v");
  in.nmodels = nmodels;
  in.dt = dt;
  in.nt = nt;
  in.nshots = nshots;
  in.nsources = nsources;
  in.nreceivers = nreceivers;
  const std::int64_t source_traces = checked_product(nshots, nsources, "nsources");
  in.source_amplitudes = input_span(amplitudes, checked_product(source_traces, nt, "source_amplitudes"),
                                    "source_amplitudes");
  in.source_locations = input_span(source_locations, checked_product(source_traces, ndim, "source_locations"),
                                   "source_locations");
  in.receiver_locations =
      input_span(receiver_locations,
                 checked_product(checked_product(nshots, nreceivers, "nreceivers"), ndim, "receiver_locations"),
                 "receiver_locations");
  return in;
}

wv::ScalarOptions make_options(int ndim, int accuracy, const int64_t* pml_width, double pml_freq,
                               double max_vel) {
  wv::ScalarOptions opt;
  opt.accuracy = accuracy;
  if (pml_width)
    for (int i = 0; i < 2 * ndim; ++i) opt.pml_width[i] = pml_width[i];
  opt.pml_freq = pml_freq;
  opt.max_vel = max_vel;
  opt.storage = wv::StorageMode::device;
  return opt;
}

template <class T>
void copy_out(const std::vector<T>& from, T* to, const char* argument) {
  if (from.empty()) return;
  require_pointer(to, argument);
  std::copy(from.begin(), from.end(), to);
}

template <class T>
sciproxy_status scalar_impl(int ndim, const int64_t* shape, const double* spacing, const T* v,
                            int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                            int64_t nsources, int64_t nreceivers, const T* amplitudes,
                            const int64_t* source_locations, const int64_t* receiver_locations,
                            int accuracy, const int64_t* pml_width, double pml_freq,
                            double max_vel, const char* device, T* receiver_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    if (nreceivers > 0) require_pointer(receiver_amplitudes, "receiver_amplitudes");
    const auto opt = make_options(ndim, accuracy, pml_width, pml_freq, max_vel);
    const auto dev = sciproxy::select_device(device);
    const auto out = wv::scalar<T>(dev, in, opt);
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
  });
}

template <class T>
sciproxy_status gradient_impl(int ndim, const int64_t* shape, const double* spacing, const T* v,
                              int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                              int64_t nsources, int64_t nreceivers, const T* amplitudes,
                              const int64_t* source_locations, const int64_t* receiver_locations,
                              int accuracy, const int64_t* pml_width, double pml_freq,
                              double max_vel, const char* device, const T* grad_receivers,
                              T* grad_v, T* grad_source_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    require_pointer(grad_v, "grad_v");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    const auto grad_r = input_span(grad_receivers, checked_product(nshots * nreceivers, nt,
                                                                   "grad_receiver_amplitudes"),
                                   "grad_receiver_amplitudes");
    const auto opt = make_options(ndim, accuracy, pml_width, pml_freq, max_vel);
    const auto dev = sciproxy::select_device(device);
    const auto g = wv::scalar_gradient<T>(dev, in, opt, grad_r);
    copy_out(g.v, grad_v, "grad_v");
    if (grad_source_amplitudes) copy_out(g.source_amplitudes, grad_source_amplitudes, "grad_source_amplitudes");
  });
}


// Born: the shared arguments plus the scatter and the background receivers.
template <class T>
wv::ScalarBornInput<T> make_born_input(const wv::ScalarInput<T>& in, const T* scatter,
                                       int64_t nbg_receivers, const int64_t* bg_receiver_locations) {
  sciproxy::require(nbg_receivers >= 0, "nbg_receivers", "0 or more", std::to_string(nbg_receivers));
  wv::ScalarBornInput<T> b;
  b.background = in;
  b.scatter = optional_span(scatter, static_cast<std::int64_t>(in.v.size()));  // NULL: none
  b.nbg_receivers = nbg_receivers;
  b.bg_receiver_locations = input_span(
      bg_receiver_locations,
      checked_product(checked_product(in.nshots, nbg_receivers, "nbg_receivers"), in.grid.ndim,
                      "bg_receiver_locations"),
      "bg_receiver_locations");
  return b;
}

template <class T>
sciproxy_status born_impl(int ndim, const int64_t* shape, const double* spacing, const T* v,
                          const T* scatter, int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                          int64_t nsources, int64_t nreceivers, int64_t nbg_receivers,
                          const T* amplitudes, const int64_t* source_locations,
                          const int64_t* receiver_locations, const int64_t* bg_receiver_locations,
                          int accuracy, const int64_t* pml_width, double pml_freq, double max_vel,
                          const char* device, T* receiver_amplitudes, T* bg_receiver_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    require_pointer(scatter, "scatter");
    const auto born = make_born_input(in, scatter, nbg_receivers, bg_receiver_locations);
    if (nreceivers > 0) require_pointer(receiver_amplitudes, "receiver_amplitudes");
    if (nbg_receivers > 0) require_pointer(bg_receiver_amplitudes, "bg_receiver_amplitudes");
    const auto opt = make_options(ndim, accuracy, pml_width, pml_freq, max_vel);
    const auto out = wv::scalar_born<T>(sciproxy::select_device(device), born, opt);
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
    copy_out(out.bg_receiver_amplitudes, bg_receiver_amplitudes, "bg_receiver_amplitudes");
  });
}

template <class T>
sciproxy_status born_gradient_impl(
    int ndim, const int64_t* shape, const double* spacing, const T* v, const T* scatter,
    int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    int64_t nbg_receivers, const T* amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, const int64_t* bg_receiver_locations, int accuracy,
    const int64_t* pml_width, double pml_freq, double max_vel, const char* device,
    const T* grad_receivers, const T* grad_bg_receivers, T* grad_scatter,
    T* grad_source_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    require_pointer(grad_scatter, "grad_scatter");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    // The scatter matters only for the source gradient (NULL: zero).
    const auto born = make_born_input(in, scatter, nbg_receivers, bg_receiver_locations);
    const auto grad_r = input_span(
        grad_receivers,
        checked_product(checked_product(nshots, nreceivers, "nreceivers"), nt, "grad_receiver_amplitudes"),
        "grad_receiver_amplitudes");
    std::span<const T> grad_bg;
    if (grad_bg_receivers)
      grad_bg = input_span(grad_bg_receivers,
                           checked_product(checked_product(nshots, nbg_receivers, "nbg_receivers"), nt,
                                           "grad_bg_receiver_amplitudes"),
                           "grad_bg_receiver_amplitudes");
    const auto opt = make_options(ndim, accuracy, pml_width, pml_freq, max_vel);
    const auto g = wv::scalar_born_gradient<T>(sciproxy::select_device(device), born, opt, grad_r,
                                               grad_bg, grad_source_amplitudes != nullptr);
    copy_out(g.scatter, grad_scatter, "grad_scatter");
    if (grad_source_amplitudes) {
      if (g.source_amplitudes.empty())  // no sources or no steps: the gradient is zero
        std::fill_n(grad_source_amplitudes, nshots * nsources * nt, T(0));
      else
        copy_out(g.source_amplitudes, grad_source_amplitudes, "grad_source_amplitudes");
    }
  });
}

}  // namespace

extern "C" {

sciproxy_status sciproxy_scalar_f32(int ndim, const int64_t* shape, const double* spacing,
                                    const float* v, int64_t nmodels, double dt, int64_t nt,
                                    int64_t nshots, int64_t nsources, int64_t nreceivers,
                                    const float* source_amplitudes, const int64_t* source_locations,
                                    const int64_t* receiver_locations, int accuracy,
                                    const int64_t* pml_width, double pml_freq, double max_vel,
                                    const char* device, float* receiver_amplitudes) {
  return scalar_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                     source_amplitudes, source_locations, receiver_locations, accuracy, pml_width,
                     pml_freq, max_vel, device, receiver_amplitudes);
}

sciproxy_status sciproxy_scalar_f64(int ndim, const int64_t* shape, const double* spacing,
                                    const double* v, int64_t nmodels, double dt, int64_t nt,
                                    int64_t nshots, int64_t nsources, int64_t nreceivers,
                                    const double* source_amplitudes,
                                    const int64_t* source_locations,
                                    const int64_t* receiver_locations, int accuracy,
                                    const int64_t* pml_width, double pml_freq, double max_vel,
                                    const char* device, double* receiver_amplitudes) {
  return scalar_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                     source_amplitudes, source_locations, receiver_locations, accuracy, pml_width,
                     pml_freq, max_vel, device, receiver_amplitudes);
}

sciproxy_status sciproxy_scalar_gradient_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const char* device, const float* grad_receiver_amplitudes, float* grad_v,
    float* grad_source_amplitudes) {
  return gradient_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                       source_amplitudes, source_locations, receiver_locations, accuracy,
                       pml_width, pml_freq, max_vel, device, grad_receiver_amplitudes, grad_v,
                       grad_source_amplitudes);
}

sciproxy_status sciproxy_scalar_gradient_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const char* device, const double* grad_receiver_amplitudes, double* grad_v,
    double* grad_source_amplitudes) {
  return gradient_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                       source_amplitudes, source_locations, receiver_locations, accuracy,
                       pml_width, pml_freq, max_vel, device, grad_receiver_amplitudes, grad_v,
                       grad_source_amplitudes);
}

#define SCIPROXY_BORN_C(T, S)                                                                      \
  sciproxy_status sciproxy_scalar_born_##S(                                                        \
      int ndim, const int64_t* shape, const double* spacing, const T* v, const T* scatter,         \
      int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources,                    \
      int64_t nreceivers, int64_t nbg_receivers, const T* source_amplitudes,                       \
      const int64_t* source_locations, const int64_t* receiver_locations,                          \
      const int64_t* bg_receiver_locations, int accuracy, const int64_t* pml_width,                \
      double pml_freq, double max_vel, const char* device, T* receiver_amplitudes,                 \
      T* bg_receiver_amplitudes) {                                                                 \
    return born_impl(ndim, shape, spacing, v, scatter, nmodels, dt, nt, nshots, nsources,          \
                     nreceivers, nbg_receivers, source_amplitudes, source_locations,               \
                     receiver_locations, bg_receiver_locations, accuracy, pml_width, pml_freq,     \
                     max_vel, device, receiver_amplitudes, bg_receiver_amplitudes);                \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_born_gradient_##S(                                               \
      int ndim, const int64_t* shape, const double* spacing, const T* v, const T* scatter,         \
      int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources,                    \
      int64_t nreceivers, int64_t nbg_receivers, const T* source_amplitudes,                       \
      const int64_t* source_locations, const int64_t* receiver_locations,                          \
      const int64_t* bg_receiver_locations, int accuracy, const int64_t* pml_width,                \
      double pml_freq, double max_vel, const char* device, const T* grad_receiver_amplitudes,      \
      const T* grad_bg_receiver_amplitudes, T* grad_scatter, T* grad_source_amplitudes) {          \
    return born_gradient_impl(ndim, shape, spacing, v, scatter, nmodels, dt, nt, nshots, nsources, \
                              nreceivers, nbg_receivers, source_amplitudes, source_locations,      \
                              receiver_locations, bg_receiver_locations, accuracy, pml_width,      \
                              pml_freq, max_vel, device, grad_receiver_amplitudes,                 \
                              grad_bg_receiver_amplitudes, grad_scatter, grad_source_amplitudes);  \
  }
SCIPROXY_BORN_C(float, f32)
SCIPROXY_BORN_C(double, f64)
#undef SCIPROXY_BORN_C

}  // extern "C"
