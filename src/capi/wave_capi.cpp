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

// Deepwave's survey_pad and origin on top of make_options (NULL: none).
wv::ScalarOptions make_window_options(int ndim, int accuracy, const int64_t* pml_width,
                                      double pml_freq, double max_vel, const int64_t* survey_pad,
                                      const int64_t* origin) {
  wv::ScalarOptions opt = make_options(ndim, accuracy, pml_width, pml_freq, max_vel);
  if (survey_pad)
    for (int i = 0; i < 2 * ndim; ++i) opt.survey_pad[i] = survey_pad[i];
  if (origin) {
    opt.origin.emplace();
    opt.origin->fill(0);
    for (int d = 0; d < ndim; ++d) (*opt.origin)[d] = origin[d];
  }
  return opt;
}

// A C state as the library's (NULL: none; a NULL array: zero).
template <class T, class CState>
wv::ScalarState<T> state_in(const CState* c, int ndim, int64_t nshots, const char* name) {
  wv::ScalarState<T> st;
  if (c == nullptr) return st;
  int64_t size = nshots;
  for (int d = 0; d < ndim; ++d) {
    sciproxy::require(c->padded_shape[d] >= 1, fmt::format("{}.padded_shape[{}]", name, d),
                      "at least 1 cell", std::to_string(c->padded_shape[d]));
    st.padded_shape[d] = c->padded_shape[d];
    size = checked_product(size, c->padded_shape[d], fmt::format("{}.padded_shape", name).c_str());
  }
  auto take = [&](const T* from, std::vector<T>& to) {
    if (from) to.assign(from, from + size);
  };
  take(c->wavefield, st.wavefield);
  take(c->previous_wavefield, st.previous_wavefield);
  for (int d = 0; d < ndim; ++d) {
    take(c->psi[d], st.psi[d]);
    take(c->zeta[d], st.zeta[d]);
  }
  return st;
}

// The library's state into a C one (NULL: not wanted): its padded_shape, and each field whose
// array is given (an empty field is zero).
template <class T, class CState>
void state_out(const wv::ScalarState<T>& st, int ndim, int64_t nshots, CState* c) {
  if (c == nullptr) return;
  int64_t size = nshots;
  for (int d = 0; d < 3; ++d) {
    c->padded_shape[d] = d < ndim ? st.padded_shape[d] : 1;
    size *= c->padded_shape[d];
  }
  auto give = [&](const std::vector<T>& from, T* to) {
    if (to == nullptr) return;
    if (from.empty())
      std::fill_n(to, size, T(0));
    else
      std::copy(from.begin(), from.end(), to);
  };
  give(st.wavefield, c->wavefield);
  give(st.previous_wavefield, c->previous_wavefield);
  for (int d = 0; d < ndim; ++d) {
    give(st.psi[d], c->psi[d]);
    give(st.zeta[d], c->zeta[d]);
  }
}

template <class T>
sciproxy_status state_shape_impl(int ndim, const int64_t* shape, const double* spacing,
                                 const T* v, int64_t nmodels, double dt, int64_t nt,
                                 int64_t nshots, int64_t nsources, int64_t nreceivers,
                                 const T* amplitudes, const int64_t* source_locations,
                                 const int64_t* receiver_locations, int accuracy,
                                 const int64_t* pml_width, double pml_freq, double max_vel,
                                 const int64_t* survey_pad, int64_t* padded_shape) {
  return guarded([&] {
    require_pointer(padded_shape, "padded_shape");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    const auto opt =
        make_window_options(ndim, accuracy, pml_width, pml_freq, max_vel, survey_pad, nullptr);
    const auto n = wv::scalar_state_shape<T>(in, opt);
    std::copy_n(n.begin(), ndim, padded_shape);
  });
}

template <class T, class CState>
sciproxy_status scalar_impl(int ndim, const int64_t* shape, const double* spacing, const T* v,
                            int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                            int64_t nsources, int64_t nreceivers, const T* amplitudes,
                            const int64_t* source_locations, const int64_t* receiver_locations,
                            int accuracy, const int64_t* pml_width, double pml_freq,
                            double max_vel, const int64_t* survey_pad, const int64_t* origin,
                            const CState* initial, const char* device, T* receiver_amplitudes,
                            CState* final_state) {
  return guarded([&] {
    require_pointer(device, "device");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    if (nreceivers > 0) require_pointer(receiver_amplitudes, "receiver_amplitudes");
    const auto opt =
        make_window_options(ndim, accuracy, pml_width, pml_freq, max_vel, survey_pad, origin);
    const auto start = state_in<T>(initial, ndim, nshots, "initial");
    const auto dev = sciproxy::select_device(device);
    const auto out = wv::scalar<T>(dev, in, opt, initial ? &start : nullptr);
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
    state_out(out.state, ndim, nshots, final_state);
  });
}

template <class T, class CState>
sciproxy_status gradient_impl(int ndim, const int64_t* shape, const double* spacing, const T* v,
                              int64_t nmodels, double dt, int64_t nt, int64_t nshots,
                              int64_t nsources, int64_t nreceivers, const T* amplitudes,
                              const int64_t* source_locations, const int64_t* receiver_locations,
                              int accuracy, const int64_t* pml_width, double pml_freq,
                              double max_vel, const int64_t* survey_pad, const int64_t* origin,
                              const CState* initial, const char* device, const T* grad_receivers,
                              const CState* grad_final, T* grad_v, T* grad_source_amplitudes,
                              CState* grad_initial) {
  return guarded([&] {
    require_pointer(device, "device");
    require_pointer(grad_v, "grad_v");
    const wv::ScalarInput<T> in =
        make_input<T>(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,
                      amplitudes, source_locations, receiver_locations);
    const auto grad_r = input_span(grad_receivers, checked_product(nshots * nreceivers, nt,
                                                                   "grad_receiver_amplitudes"),
                                   "grad_receiver_amplitudes");
    const auto opt =
        make_window_options(ndim, accuracy, pml_width, pml_freq, max_vel, survey_pad, origin);
    const auto start = state_in<T>(initial, ndim, nshots, "initial");
    const auto end = state_in<T>(grad_final, ndim, nshots, "grad_final");
    const auto dev = sciproxy::select_device(device);
    const auto g = wv::scalar_gradient<T>(dev, in, opt, grad_r, initial ? &start : nullptr,
                                          grad_final ? &end : nullptr);
    copy_out(g.v, grad_v, "grad_v");
    if (grad_source_amplitudes) copy_out(g.source_amplitudes, grad_source_amplitudes, "grad_source_amplitudes");
    state_out(g.initial_state, ndim, nshots, grad_initial);
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

#define SCIPROXY_SCALAR_C(T, S)                                                                    \
  sciproxy_status sciproxy_scalar_##S(                                                             \
      int ndim, const int64_t* shape, const double* spacing, const T* v, int64_t nmodels,         \
      double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,                 \
      const T* source_amplitudes, const int64_t* source_locations,                                 \
      const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq, \
      double max_vel, const char* device, T* receiver_amplitudes) {                                \
    return scalar_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,     \
                       source_amplitudes, source_locations, receiver_locations, accuracy,          \
                       pml_width, pml_freq, max_vel, nullptr, nullptr,                             \
                       static_cast<const sciproxy_scalar_state_##S*>(nullptr), device,             \
                       receiver_amplitudes, static_cast<sciproxy_scalar_state_##S*>(nullptr));     \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_ex_##S(                                                          \
      int ndim, const int64_t* shape, const double* spacing, const T* v, int64_t nmodels,         \
      double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,                 \
      const T* source_amplitudes, const int64_t* source_locations,                                 \
      const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq, \
      double max_vel, const int64_t* survey_pad, const int64_t* origin,                            \
      const sciproxy_scalar_state_##S* initial, const char* device, T* receiver_amplitudes,        \
      sciproxy_scalar_state_##S* final_state) {                                                    \
    return scalar_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,     \
                       source_amplitudes, source_locations, receiver_locations, accuracy,          \
                       pml_width, pml_freq, max_vel, survey_pad, origin, initial, device,          \
                       receiver_amplitudes, final_state);                                          \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_gradient_##S(                                                    \
      int ndim, const int64_t* shape, const double* spacing, const T* v, int64_t nmodels,         \
      double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,                 \
      const T* source_amplitudes, const int64_t* source_locations,                                 \
      const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq, \
      double max_vel, const char* device, const T* grad_receiver_amplitudes, T* grad_v,            \
      T* grad_source_amplitudes) {                                                                 \
    return gradient_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,   \
                         source_amplitudes, source_locations, receiver_locations, accuracy,        \
                         pml_width, pml_freq, max_vel, nullptr, nullptr,                           \
                         static_cast<const sciproxy_scalar_state_##S*>(nullptr), device,           \
                         grad_receiver_amplitudes,                                                 \
                         static_cast<const sciproxy_scalar_state_##S*>(nullptr), grad_v,           \
                         grad_source_amplitudes, static_cast<sciproxy_scalar_state_##S*>(nullptr)); \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_gradient_ex_##S(                                                 \
      int ndim, const int64_t* shape, const double* spacing, const T* v, int64_t nmodels,         \
      double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,                 \
      const T* source_amplitudes, const int64_t* source_locations,                                 \
      const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq, \
      double max_vel, const int64_t* survey_pad, const int64_t* origin,                            \
      const sciproxy_scalar_state_##S* initial, const char* device,                                \
      const T* grad_receiver_amplitudes, const sciproxy_scalar_state_##S* grad_final, T* grad_v,   \
      T* grad_source_amplitudes, sciproxy_scalar_state_##S* grad_initial) {                        \
    return gradient_impl(ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers,   \
                         source_amplitudes, source_locations, receiver_locations, accuracy,        \
                         pml_width, pml_freq, max_vel, survey_pad, origin, initial, device,        \
                         grad_receiver_amplitudes, grad_final, grad_v, grad_source_amplitudes,     \
                         grad_initial);                                                            \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_state_shape_##S(                                                 \
      int ndim, const int64_t* shape, const double* spacing, const T* v, int64_t nmodels,         \
      double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,                 \
      const T* source_amplitudes, const int64_t* source_locations,                                 \
      const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq, \
      double max_vel, const int64_t* survey_pad, int64_t* padded_shape) {                          \
    return state_shape_impl<T>(                                                                    \
        ndim, shape, spacing, v, nmodels, dt, nt, nshots, nsources, nreceivers, source_amplitudes, \
        source_locations, receiver_locations, accuracy, pml_width, pml_freq, max_vel, survey_pad,  \
        padded_shape);                                                                             \
  }
SCIPROXY_SCALAR_C(float, f32)
SCIPROXY_SCALAR_C(double, f64)
#undef SCIPROXY_SCALAR_C

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
