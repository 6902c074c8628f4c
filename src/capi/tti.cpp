// C ABI of the tti family (include/sciproxy/c/tti.h): extern "C" wrappers over
// sciproxy::tti::tti_forward, tti_adjoint, tti_max_dt (the coupled P/M system) and tti_demo (the
// workshop operator) that never throw (guarded.hpp). Under MPI (options.comm) the wrapper's own
// checks run on every rank together, so that a bad pointer on one rank fails every rank
// (sciproxy_tti_demo_block, not collective, excepted).
#include "sciproxy/tti.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"
#include "sciproxy/tti_demo.hpp"

namespace {

namespace tt = sciproxy::tti;
using sciproxy::capi::checked_product;
using sciproxy::capi::copy_out;
using sciproxy::capi::guarded;
using sciproxy::capi::input_span;
using sciproxy::capi::optional_span;
using sciproxy::capi::require_pointer;

struct Options {
  tt::TtiOptions library;
  const char* device = nullptr;
};

Options options_of(const sciproxy_tti_options* options) {
  const auto c =
      sciproxy::capi::read_options(options, sciproxy_tti_options_default, "sciproxy_tti_options");
  Options o;
  tt::TtiOptions& opt = o.library;
  opt.space_order = c.space_order;
  std::copy(c.sponge_width, c.sponge_width + 6, opt.sponge_width.begin());
  opt.q_min = c.q_min;
  opt.q_interior = c.q_interior;
  opt.freq_q = c.freq_q;
  opt.default_f = c.default_f;
  opt.free_surface = c.free_surface != 0;
  opt.nparallel = std::max(0, c.nparallel);
  opt.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
  std::copy(c.process_grid, c.process_grid + 3, opt.process_grid.begin());
  o.device = c.device;
  return o;
}

// The communicator of the options (none when they are NULL), read before the other checks so that
// those run on every rank together (checked_on_every_rank).
sciproxy::Communicator comm_of(const sciproxy_tti_options* options) {
  if (options == nullptr) return {};
  const auto c =
      sciproxy::capi::read_options(options, sciproxy_tti_options_default, "sciproxy_tti_options");
  return sciproxy::Communicator::from_handle(c.comm, "options.comm");
}

// The wrapper's own checks on every rank of the call, so that one rank's bad pointer fails every
// rank instead of leaving the others waiting in the call's first collective.
template <class F>
void checked_on_every_rank(const sciproxy::Communicator& comm, F&& checks) {
  sciproxy::collective::on_every_rank(comm, std::forward<F>(checks));
}

template <class T, class CModel>
tt::TtiModel<T> model_of(const CModel& model) {
  tt::TtiModel<T> m;
  std::int64_t cells = 1;
  for (int d = 0; d < 3; ++d) {
    sciproxy::require(model.shape[d] >= 1, fmt::format("model.shape[{}]", d), "at least 1 cell",
                      std::to_string(model.shape[d]));
    // Checked here so that the message names the C field (the library names Python's
    // grid_spacing).
    sciproxy::require(std::isfinite(model.spacing[d]) && model.spacing[d] > 0,
                      fmt::format("model.spacing[{}]", d), "a positive, finite cell size in metres",
                      fmt::format("{}", model.spacing[d]));
    m.grid.shape[d] = model.shape[d];
    m.grid.spacing[d] = model.spacing[d];
    cells = checked_product(cells, model.shape[d], "model.shape");
  }
  m.vp = input_span(model.vp, cells, "model.vp");
  m.buoyancy = optional_span(model.buoyancy, cells);
  m.epsilon = optional_span(model.epsilon, cells);
  m.delta = optional_span(model.delta, cells);
  m.theta = optional_span(model.theta, cells);
  m.phi = optional_span(model.phi, cells);
  m.f = optional_span(model.f, cells);
  return m;
}

template <class T, class CInput>
tt::TtiInput<T> input_of(const CInput* c) {
  require_pointer(c, "input");
  sciproxy::require(c->nt >= 1, "nt", "at least 1 time sample", std::to_string(c->nt));
  sciproxy::require(c->nshots >= 1, "nshots", "at least 1", std::to_string(c->nshots));
  sciproxy::require(c->nsources >= 0, "nsources", "0 or more", std::to_string(c->nsources));
  sciproxy::require(c->nreceivers >= 0, "nreceivers", "0 or more", std::to_string(c->nreceivers));
  tt::TtiInput<T> in;
  in.model = model_of<T>(c->model);
  in.dt = c->dt;
  in.nt = c->nt;
  in.nshots = c->nshots;
  in.nsources = c->nsources;
  in.nreceivers = c->nreceivers;
  const std::int64_t sources = checked_product(c->nshots, c->nsources, "nsources");
  const std::int64_t receivers = checked_product(c->nshots, c->nreceivers, "nreceivers");
  in.source_locations = input_span(
      c->source_locations, checked_product(sources, 3, "source_locations"), "source_locations");
  in.receiver_locations =
      input_span(c->receiver_locations, checked_product(receivers, 3, "receiver_locations"),
                 "receiver_locations");
  return in;
}

template <class T, class CInput>
sciproxy_status forward_impl(const CInput* input, const sciproxy_tti_options* options,
                             T* receiver_amplitudes) {
  return guarded([&] {
    Options opt;
    sciproxy::Device device;
    tt::TtiInput<T> in;
    checked_on_every_rank(comm_of(options), [&] {
      opt = options_of(options);
      device = sciproxy::capi::device_of(opt.device);
      in = input_of<T>(input);
      // Up front, not after the run: a missing output is the caller's mistake, found at once.
      if (in.nreceivers > 0) require_pointer(receiver_amplitudes, "receiver_amplitudes");
      in.source_amplitudes =
          input_span(input->source_amplitudes,
                     checked_product(in.nshots * in.nsources, in.nt, "source_amplitudes"),
                     "source_amplitudes");
    });
    // Whole on every rank (gathered from the cells' holders).
    const auto out = tt::tti_forward<T>(device, in, opt.library);
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
  });
}

template <class T, class CInput>
sciproxy_status adjoint_impl(const CInput* input, const sciproxy_tti_options* options,
                             const T* receiver_data, T* source_amplitudes) {
  return guarded([&] {
    Options opt;
    sciproxy::Device device;
    tt::TtiInput<T> in;
    std::span<const T> data;
    checked_on_every_rank(comm_of(options), [&] {
      opt = options_of(options);
      device = sciproxy::capi::device_of(opt.device);
      in = input_of<T>(input);
      if (in.nsources > 0) require_pointer(source_amplitudes, "source_amplitudes");
      data = input_span(receiver_data,
                        checked_product(in.nshots * in.nreceivers, in.nt, "receiver_data"),
                        "receiver_data");
    });
    // Whole on every rank (gathered from the cells' holders).
    const auto out = tt::tti_adjoint<T>(device, in, data, opt.library);
    copy_out(out.source_amplitudes, source_amplitudes, "source_amplitudes");
  });
}

template <class T, class CInput>
sciproxy_status max_dt_impl(const CInput* input, const sciproxy_tti_options* options,
                            double* max_dt) {
  return guarded([&] {
    require_pointer(max_dt, "max_dt");
    require_pointer(input, "input");
    const auto opt = options_of(options);
    *max_dt = tt::tti_max_dt<T>(model_of<T>(input->model), opt.library);
  });
}

// The workshop demo: a material is its field, or its constant when the field is NULL (the
// constant lives in `constants`, which must outlive the returned input).
template <class T, class CInput>
tt::TtiDemoInput<T> demo_input_of(const CInput* c, std::vector<T>& constants, bool run) {
  require_pointer(c, "input");
  if (run) sciproxy::require(c->nt >= 1, "nt", "at least 1 time step", std::to_string(c->nt));
  tt::TtiDemoInput<T> in;
  std::int64_t cells = 1;
  for (int d = 0; d < 3; ++d) {
    sciproxy::require(c->shape[d] >= 1, fmt::format("shape[{}]", d), "at least 1 grid point",
                      std::to_string(c->shape[d]));
    in.shape[d] = c->shape[d];
    in.spacing[d] = c->spacing[d];
    cells = checked_product(cells, c->shape[d], "shape");
  }
  in.dt = c->dt;
  in.nt = c->nt;
  const double values[8] = {c->vp, c->b, c->epsilon, c->eta, c->f, c->theta, c->phi, c->damping};
  const T* fields[8] = {c->vp_field, c->b_field,     c->epsilon_field, c->eta_field,
                        c->f_field,  c->theta_field, c->phi_field,     c->damping_field};
  constants.assign(values, values + 8);
  std::span<const T>* spans[8] = {&in.material.vp,  &in.material.b,      &in.material.epsilon,
                                  &in.material.eta, &in.material.f,      &in.material.theta,
                                  &in.material.phi, &in.material.damping};
  for (int i = 0; i < 8; ++i)
    *spans[i] = fields[i] ? std::span<const T>(fields[i], static_cast<std::size_t>(cells))
                          : std::span<const T>(&constants[i], 1);
  std::copy(c->source_position, c->source_position + 3, in.source_position.begin());
  // The stability limit needs neither the source nor dt (run false).
  if (run) in.source_amplitudes = input_span(c->source_amplitudes, c->nt, "source_amplitudes");
  in.initial_u = optional_span(c->initial_u, cells);
  in.initial_u_prev = optional_span(c->initial_u_prev, cells);
  return in;
}

struct DemoOptions {
  tt::TtiDemoOptions library;
  const char* device = nullptr;
};

DemoOptions demo_options_of(const sciproxy_tti_demo_options* options) {
  const auto c = sciproxy::capi::read_options(options, sciproxy_tti_demo_options_default,
                                              "sciproxy_tti_demo_options");
  DemoOptions o;
  o.library.space_order = c.space_order;
  sciproxy::require(c.form == SCIPROXY_TTI_DEMO_TWO_PASS || c.form == SCIPROXY_TTI_DEMO_FUSED,
                    "form", "SCIPROXY_TTI_DEMO_TWO_PASS (0) or SCIPROXY_TTI_DEMO_FUSED (1)",
                    std::to_string(c.form));
  o.library.form =
      c.form == SCIPROXY_TTI_DEMO_FUSED ? tt::TtiDemoForm::fused : tt::TtiDemoForm::two_pass;
  o.library.nparallel = std::max(0, c.nparallel);
  o.library.autotune = c.autotune != 0;
  o.library.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
  std::copy(c.process_grid, c.process_grid + 3, o.library.process_grid.begin());
  sciproxy::require(c.results >= 0 && c.results <= 2, "results",
                    "0 (every rank the whole grid), 1 (rank 0 only) or 2 (each rank its own block)",
                    std::to_string(c.results));
  o.library.results = static_cast<sciproxy::ResultLayout>(c.results);
  o.device = c.device;
  return o;
}

// The communicator of the demo's options (none when they are NULL), read before the other checks
// so that those run on every rank together (checked_on_every_rank).
sciproxy::Communicator demo_comm_of(const sciproxy_tti_demo_options* options) {
  if (options == nullptr) return {};
  const auto c = sciproxy::capi::read_options(options, sciproxy_tti_demo_options_default,
                                              "sciproxy_tti_demo_options");
  return sciproxy::Communicator::from_handle(c.comm, "options.comm");
}

// An output every rank receiving one passes (the array), or none does (NULL: not returned):
// `anywhere` is whether some such rank passed one.
void require_output_alike(const void* p, bool anywhere, const char* argument) {
  if (!p && anywhere)
    sciproxy::throw_invalid_argument(
        argument, "an array, as the other ranks pass one (NULL on every rank: not returned)",
        "NULL");
}

template <class T, class CInput>
sciproxy_status demo_impl(const CInput* input, const sciproxy_tti_demo_options* options, T* u,
                          T* u_prev) {
  return guarded([&] {
    const sciproxy::Communicator comm = demo_comm_of(options);
    DemoOptions opt;
    sciproxy::Device device;
    std::vector<T> constants;
    tt::TtiDemoInput<T> in;
    // Whether any rank passes u (u_prev), so that a NULL on one rank alone is its error.
    std::int64_t passed[2] = {u != nullptr, u_prev != nullptr};
    if (comm.distributed())
      for (auto& p : passed) p = sciproxy::collective::allreduce_max(comm, p);
    checked_on_every_rank(comm, [&] {
      opt = demo_options_of(options);
      device = sciproxy::capi::device_of(opt.device);
      in = demo_input_of<T>(input, constants, true);
      // With results 1 only rank 0 receives the fields (the others may pass NULL).
      const bool receives = opt.library.results != sciproxy::ResultLayout::root ||
                            !comm.distributed() || comm.rank() == 0;
      if (comm.distributed() && receives) {
        require_output_alike(u, passed[0] != 0, "u");
        require_output_alike(u_prev, passed[1] != 0, "u_prev");
      }
    });
    // The whole grid, or this rank's block (results 2), or nothing (results 1 off rank 0).
    const auto out = tt::tti_demo<T>(device, in, opt.library);
    if (u) copy_out(out.u, u, "u");
    if (u_prev) copy_out(out.u_prev, u_prev, "u_prev");
  });
}

template <class T, class CInput>
sciproxy_status demo_block_impl(const CInput* input, const sciproxy_tti_demo_options* options,
                                int64_t* origin, int64_t* shape, int* process_grid) {
  return guarded([&] {
    require_pointer(origin, "origin");
    require_pointer(shape, "shape");
    const auto opt = demo_options_of(options);
    std::vector<T> constants;
    const auto in = demo_input_of<T>(input, constants, false);
    const tt::TtiDemoBlock b = tt::tti_demo_block<T>(in, opt.library);
    std::copy(b.origin.begin(), b.origin.end(), origin);
    std::copy(b.shape.begin(), b.shape.end(), shape);
    if (process_grid) std::copy(b.process_grid.begin(), b.process_grid.end(), process_grid);
  });
}

template <class T, class CInput>
sciproxy_status demo_dt_limit_impl(const CInput* input, const sciproxy_tti_demo_options* options,
                                   double* dt_limit) {
  return guarded([&] {
    require_pointer(dt_limit, "dt_limit");
    const auto opt = demo_options_of(options);
    std::vector<T> constants;
    const auto in = demo_input_of<T>(input, constants, false);
    *dt_limit = tt::tti_demo_dt_limit<T>(in, opt.library.space_order);
  });
}

}  // namespace

extern "C" {

void sciproxy_tti_options_default(sciproxy_tti_options* options) {
  if (!options) return;
  const tt::TtiOptions d;
  *options = {};
  options->struct_size = sizeof(sciproxy_tti_options);
  options->device = "auto";
  options->space_order = d.space_order;
  std::copy(d.sponge_width.begin(), d.sponge_width.end(), options->sponge_width);
  options->q_min = d.q_min;
  options->q_interior = d.q_interior;
  options->freq_q = d.freq_q;
  options->default_f = d.default_f;
  options->free_surface = d.free_surface ? 1 : 0;
  options->nparallel = d.nparallel;
  options->comm = SCIPROXY_NO_COMM;
  std::copy(d.process_grid.begin(), d.process_grid.end(), options->process_grid);
}

void sciproxy_tti_demo_options_default(sciproxy_tti_demo_options* options) {
  if (!options) return;
  const tt::TtiDemoOptions d;
  *options = {};
  options->struct_size = sizeof(sciproxy_tti_demo_options);
  options->device = "auto";
  options->space_order = d.space_order;
  options->form =
      d.form == tt::TtiDemoForm::fused ? SCIPROXY_TTI_DEMO_FUSED : SCIPROXY_TTI_DEMO_TWO_PASS;
  options->nparallel = d.nparallel;
  options->autotune = d.autotune ? 1 : 0;
  options->comm = SCIPROXY_NO_COMM;
  std::copy(d.process_grid.begin(), d.process_grid.end(), options->process_grid);
  options->results = static_cast<int>(d.results);
}

#define SCIPROXY_TTI_C(T, S)                                                                      \
  sciproxy_status sciproxy_tti_##S(const sciproxy_tti_input_##S* input,                           \
                                   const sciproxy_tti_options* options, T* receiver_amplitudes) { \
    return forward_impl<T>(input, options, receiver_amplitudes);                                  \
  }                                                                                               \
  sciproxy_status sciproxy_tti_adjoint_##S(const sciproxy_tti_input_##S* input,                   \
                                           const sciproxy_tti_options* options,                   \
                                           const T* receiver_data, T* source_amplitudes) {        \
    return adjoint_impl<T>(input, options, receiver_data, source_amplitudes);                     \
  }                                                                                               \
  sciproxy_status sciproxy_tti_max_dt_##S(const sciproxy_tti_input_##S* input,                    \
                                          const sciproxy_tti_options* options, double* max_dt) {  \
    return max_dt_impl<T>(input, options, max_dt);                                                \
  }                                                                                               \
  sciproxy_status sciproxy_tti_demo_##S(const sciproxy_tti_demo_input_##S* input,                 \
                                        const sciproxy_tti_demo_options* options, T* u,           \
                                        T* u_prev) {                                              \
    return demo_impl<T>(input, options, u, u_prev);                                               \
  }                                                                                               \
  sciproxy_status sciproxy_tti_demo_block_##S(                                                    \
      const sciproxy_tti_demo_input_##S* input, const sciproxy_tti_demo_options* options,         \
      int64_t origin[3], int64_t shape[3], int process_grid[3]) {                                 \
    return demo_block_impl<T>(input, options, origin, shape, process_grid);                       \
  }                                                                                               \
  sciproxy_status sciproxy_tti_demo_dt_limit_##S(const sciproxy_tti_demo_input_##S* input,        \
                                                 const sciproxy_tti_demo_options* options,        \
                                                 double* dt_limit) {                              \
    return demo_dt_limit_impl<T>(input, options, dt_limit);                                       \
  }
SCIPROXY_TTI_C(float, f32)
SCIPROXY_TTI_C(double, f64)
#undef SCIPROXY_TTI_C

}  // extern "C"
