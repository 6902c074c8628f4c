// C ABI of the coupled P/M TTI propagator: extern "C" wrappers over sciproxy::tti::tti and
// tti_adjoint that never throw. Errors become a sciproxy_status and a message for
// sciproxy_last_error() on the calling thread (guarded.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "capi/guarded.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"
#include "sciproxy/tti.hpp"

namespace {

namespace wv = sciproxy::tti;
using sciproxy::capi::guarded;
using sciproxy::capi::checked_product;
using sciproxy::capi::input_span;
using sciproxy::capi::optional_span;
using sciproxy::capi::require_pointer;

wv::TtiOptions options_of(const sciproxy_tti_options* o) {
  wv::TtiOptions opt;
  if (!o) return opt;
  opt.space_order = o->space_order;
  std::copy(o->sponge_width, o->sponge_width + 6, opt.sponge_width.begin());
  opt.q_min = o->q_min;
  opt.q_interior = o->q_interior;
  opt.freq_q = o->freq_q;
  opt.default_f = o->default_f;
  opt.free_surface = o->free_surface != 0;
  opt.nparallel = std::max(0, o->nparallel);
  return opt;
}

template <class T, class Model>
wv::TtiInput<T> input_of(const Model* model, double dt, int64_t nt, int64_t nshots,
                         int64_t nsources, int64_t nreceivers, const int64_t* source_locations,
                         const int64_t* receiver_locations) {
  require_pointer(model, "model");
  sciproxy::require(nt >= 1, "nt", "at least 1 time sample", std::to_string(nt));
  sciproxy::require(nshots >= 1, "nshots", "at least 1", std::to_string(nshots));
  sciproxy::require(nsources >= 0, "nsources", "0 or more", std::to_string(nsources));
  sciproxy::require(nreceivers >= 0, "nreceivers", "0 or more", std::to_string(nreceivers));
  wv::TtiInput<T> in;
  std::int64_t cells = 1;
  for (int d = 0; d < 3; ++d) {
    sciproxy::require(model->shape[d] >= 1, fmt::format("model.shape[{}]", d), "at least 1 cell",
                      std::to_string(model->shape[d]));
    in.model.grid.shape[d] = model->shape[d];
    in.model.grid.spacing[d] = model->spacing[d];
    cells = checked_product(cells, model->shape[d], "model.shape");
  }
  in.model.vp = input_span(model->vp, cells, "model.vp");
  in.model.buoyancy = optional_span(model->buoyancy, cells);
  in.model.epsilon = optional_span(model->epsilon, cells);
  in.model.delta = optional_span(model->delta, cells);
  in.model.theta = optional_span(model->theta, cells);
  in.model.phi = optional_span(model->phi, cells);
  in.model.f = optional_span(model->f, cells);
  in.dt = dt;
  in.nt = nt;
  in.nshots = nshots;
  in.nsources = nsources;
  in.nreceivers = nreceivers;
  in.source_locations = input_span(
      source_locations,
      checked_product(checked_product(nshots, nsources, "nsources"), 3, "source_locations"),
      "source_locations");
  in.receiver_locations = input_span(
      receiver_locations,
      checked_product(checked_product(nshots, nreceivers, "nreceivers"), 3, "receiver_locations"),
      "receiver_locations");
  return in;
}

template <class T>
void copy_out(const std::vector<T>& from, T* to, const char* argument) {
  if (from.empty()) return;
  require_pointer(to, argument);
  std::copy(from.begin(), from.end(), to);
}

template <class T, class Model>
sciproxy_status forward_impl(const Model* model, const sciproxy_tti_options* options, double dt,
                             int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
                             const T* amplitudes, const int64_t* source_locations,
                             const int64_t* receiver_locations, const char* device,
                             T* receiver_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    wv::TtiInput<T> in = input_of<T>(model, dt, nt, nshots, nsources, nreceivers,
                                     source_locations, receiver_locations);
    in.source_amplitudes = input_span(
        amplitudes, checked_product(nshots * nsources, nt, "source_amplitudes"), "source_amplitudes");
    const auto out = wv::tti_forward<T>(sciproxy::select_device(device), in, options_of(options));
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
  });
}

template <class T, class Model>
sciproxy_status adjoint_impl(const Model* model, const sciproxy_tti_options* options, double dt,
                             int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
                             const T* receiver_data, const int64_t* source_locations,
                             const int64_t* receiver_locations, const char* device,
                             T* source_amplitudes) {
  return guarded([&] {
    require_pointer(device, "device");
    const wv::TtiInput<T> in = input_of<T>(model, dt, nt, nshots, nsources, nreceivers,
                                           source_locations, receiver_locations);
    const auto data = input_span(receiver_data,
                                 checked_product(nshots * nreceivers, nt, "receiver_data"),
                                 "receiver_data");
    const auto out =
        wv::tti_adjoint<T>(sciproxy::select_device(device), in, data, options_of(options));
    copy_out(out.source_amplitudes, source_amplitudes, "source_amplitudes");
  });
}

}  // namespace

extern "C" {

sciproxy_tti_options sciproxy_tti_default_options(void) {
  const wv::TtiOptions d;
  sciproxy_tti_options o;
  o.space_order = d.space_order;
  std::copy(d.sponge_width.begin(), d.sponge_width.end(), o.sponge_width);
  o.q_min = d.q_min;
  o.q_interior = d.q_interior;
  o.freq_q = d.freq_q;
  o.default_f = d.default_f;
  o.free_surface = d.free_surface ? 1 : 0;
  o.nparallel = d.nparallel;
  return o;
}

sciproxy_status sciproxy_tti_f64(const sciproxy_tti_model_f64* model,
                                 const sciproxy_tti_options* options, double dt, int64_t nt,
                                 int64_t nshots, int64_t nsources, int64_t nreceivers,
                                 const double* source_amplitudes, const int64_t* source_locations,
                                 const int64_t* receiver_locations, const char* device,
                                 double* receiver_amplitudes) {
  return forward_impl<double>(model, options, dt, nt, nshots, nsources, nreceivers,
                              source_amplitudes, source_locations, receiver_locations, device,
                              receiver_amplitudes);
}

sciproxy_status sciproxy_tti_f32(const sciproxy_tti_model_f32* model,
                                 const sciproxy_tti_options* options, double dt, int64_t nt,
                                 int64_t nshots, int64_t nsources, int64_t nreceivers,
                                 const float* source_amplitudes, const int64_t* source_locations,
                                 const int64_t* receiver_locations, const char* device,
                                 float* receiver_amplitudes) {
  return forward_impl<float>(model, options, dt, nt, nshots, nsources, nreceivers,
                             source_amplitudes, source_locations, receiver_locations, device,
                             receiver_amplitudes);
}

sciproxy_status sciproxy_tti_adjoint_f64(const sciproxy_tti_model_f64* model,
                                         const sciproxy_tti_options* options, double dt,
                                         int64_t nt, int64_t nshots, int64_t nsources,
                                         int64_t nreceivers, const double* receiver_data,
                                         const int64_t* source_locations,
                                         const int64_t* receiver_locations, const char* device,
                                         double* source_amplitudes) {
  return adjoint_impl<double>(model, options, dt, nt, nshots, nsources, nreceivers, receiver_data,
                              source_locations, receiver_locations, device, source_amplitudes);
}

sciproxy_status sciproxy_tti_adjoint_f32(const sciproxy_tti_model_f32* model,
                                         const sciproxy_tti_options* options, double dt,
                                         int64_t nt, int64_t nshots, int64_t nsources,
                                         int64_t nreceivers, const float* receiver_data,
                                         const int64_t* source_locations,
                                         const int64_t* receiver_locations, const char* device,
                                         float* source_amplitudes) {
  return adjoint_impl<float>(model, options, dt, nt, nshots, nsources, nreceivers, receiver_data,
                             source_locations, receiver_locations, device, source_amplitudes);
}

}  // extern "C"
