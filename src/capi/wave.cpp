// C ABI of the wave family (include/sciproxy/c/wave.h): extern "C" wrappers over
// sciproxy::wave::scalar, scalar_gradient, scalar_state_shape, scalar_born and
// scalar_born_gradient that never throw (guarded.hpp).
#include "sciproxy/wave.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"
#include "wave/storage_directory.hpp"

namespace {

namespace wv = sciproxy::wave;
using sciproxy::capi::checked_product;
using sciproxy::capi::copy_out;
using sciproxy::capi::guarded;
using sciproxy::capi::input_span;
using sciproxy::capi::optional_span;
using sciproxy::capi::require_pointer;

// The C input as the library's, checked enough to size the arrays; the library checks values.
template <class T, class CInput>
wv::ScalarInput<T> input_of(const CInput* c) {
  require_pointer(c, "input");
  const int ndim = c->ndim;
  sciproxy::require(ndim >= 1 && ndim <= wv::kMaxDims, "ndim", "1, 2 or 3", std::to_string(ndim));
  sciproxy::require(c->nt >= 1, "nt", "at least 1 time sample", std::to_string(c->nt));
  sciproxy::require(c->nshots >= 1, "nshots", "at least 1", std::to_string(c->nshots));
  sciproxy::require(c->nsources >= 0, "nsources", "0 or more", std::to_string(c->nsources));
  sciproxy::require(c->nreceivers >= 0, "nreceivers", "0 or more", std::to_string(c->nreceivers));
  sciproxy::require(c->nmodels == 1 || c->nmodels == c->nshots, "nmodels",
                    fmt::format("1 or nshots ({})", c->nshots), std::to_string(c->nmodels));
  wv::ScalarInput<T> in;
  in.grid.ndim = ndim;
  std::int64_t cells = 1;
  for (int d = 0; d < ndim; ++d) {
    sciproxy::require(c->shape[d] >= 1, fmt::format("shape[{}]", d), "at least 1 cell",
                      std::to_string(c->shape[d]));
    // Checked here so that the message names the C field (the library names Python's
    // grid_spacing).
    sciproxy::require(std::isfinite(c->spacing[d]) && c->spacing[d] > 0,
                      fmt::format("spacing[{}]", d), "a positive, finite cell size in metres",
                      fmt::format("{}", c->spacing[d]));
    in.grid.shape[d] = c->shape[d];
    in.grid.spacing[d] = c->spacing[d];
    cells = checked_product(cells, c->shape[d], "shape");
  }
  in.v = input_span(c->v, checked_product(c->nmodels, cells, "v"), "v");
  in.nmodels = c->nmodels;
  in.dt = c->dt;
  in.nt = c->nt;
  in.nshots = c->nshots;
  in.nsources = c->nsources;
  in.nreceivers = c->nreceivers;
  const std::int64_t sources = checked_product(c->nshots, c->nsources, "nsources");
  const std::int64_t receivers = checked_product(c->nshots, c->nreceivers, "nreceivers");
  in.source_amplitudes =
      input_span(c->source_amplitudes, checked_product(sources, c->nt, "source_amplitudes"),
                 "source_amplitudes");
  in.source_locations = input_span(
      c->source_locations, checked_product(sources, ndim, "source_locations"), "source_locations");
  in.receiver_locations =
      input_span(c->receiver_locations, checked_product(receivers, ndim, "receiver_locations"),
                 "receiver_locations");
  return in;
}

struct Options {
  wv::ScalarOptions library;
  sciproxy::Device device;
};

Options options_of(const sciproxy_scalar_options* options, int ndim) {
  const auto c = sciproxy::capi::read_options(options, sciproxy_scalar_options_default,
                                              "sciproxy_scalar_options");
  Options o;
  wv::ScalarOptions& opt = o.library;
  opt.accuracy = c.accuracy;
  std::copy(c.pml_width, c.pml_width + 2 * wv::kMaxDims, opt.pml_width.begin());
  opt.pml_freq = c.pml_freq;
  opt.max_vel = c.max_vel;
  std::copy(c.survey_pad, c.survey_pad + 2 * wv::kMaxDims, opt.survey_pad.begin());
  if (c.has_origin) {
    opt.origin.emplace();
    opt.origin->fill(0);
    for (int d = 0; d < ndim; ++d) (*opt.origin)[d] = c.origin[d];
  }
  opt.model_gradient_sampling_interval = c.model_gradient_sampling_interval;
  opt.freq_taper_frac = c.freq_taper_frac;
  opt.time_pad_frac = c.time_pad_frac;
  opt.time_taper = c.time_taper != 0;
  switch (c.storage) {
    case SCIPROXY_STORAGE_DEVICE:
      opt.storage = wv::StorageMode::device;
      break;
    case SCIPROXY_STORAGE_HOST:
      opt.storage = wv::StorageMode::host;
      break;
    case SCIPROXY_STORAGE_DISK:
      opt.storage = wv::StorageMode::disk;
      break;
    case SCIPROXY_STORAGE_NONE:
      opt.storage = wv::StorageMode::none;
      break;
    default:
      sciproxy::throw_invalid_argument("storage", "a sciproxy_storage_mode (0, 1, 2 or 3)",
                                       std::to_string(c.storage));
  }
  opt.storage_compression = c.storage_compression != 0;
  opt.storage_directory = c.storage_directory != nullptr ? c.storage_directory : "";
  if (opt.storage == wv::StorageMode::disk)  // checked here to name C's field in the error
    opt.storage_directory =
        wv::detail::storage_directory(opt.storage_directory, "options.storage_directory").string();
  opt.nparallel = std::max(0, c.nparallel);
  opt.autotune = c.autotune != 0;
  // MPI: C's outputs are sized by the input's shots, so the rows a rank receives are those:
  // every shot given, the whole results on every rank (or on rank 0, the others' pointers unused);
  // each rank's own shots, its own shots' results.
  opt.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
  sciproxy::require(c.shots == 0 || c.shots == 1, "options.shots",
                    "0 (every rank passes every shot) or 1 (each rank its own)",
                    std::to_string(c.shots));
  opt.shots = static_cast<sciproxy::RankItems>(c.shots);
  sciproxy::require(c.shots == 0 ? (c.results == 0 || c.results == 1) : c.results == 2,
                    "options.results",
                    c.shots == 0 ? "0 (every rank) or 1 (rank 0) with shots 0"
                                 : "2 (each rank its own shots) with shots 1",
                    std::to_string(c.results));
  opt.results = static_cast<sciproxy::ResultLayout>(c.results);
  o.device = sciproxy::capi::device_of(c.device);
  return o;
}

// The communicator of the options (none when they are NULL), read before the other checks so that
// those run on every rank together (checked_on_every_rank).
sciproxy::Communicator comm_of(const sciproxy_scalar_options* options) {
  if (options == nullptr) return {};
  const auto c = sciproxy::capi::read_options(options, sciproxy_scalar_options_default,
                                              "sciproxy_scalar_options");
  return sciproxy::Communicator::from_handle(c.comm, "options.comm");
}

// Whether this rank receives the shots' results (not off rank 0 with results 1).
bool receives_results(const wv::ScalarOptions& o) {
  return !(o.comm.distributed() && o.results == sciproxy::ResultLayout::root && o.comm.rank() != 0);
}

// The wrapper's own checks on every rank of the call, so that one rank's bad pointer fails every
// rank instead of leaving the others waiting in the call's first collective.
template <class F>
void checked_on_every_rank(const sciproxy::Communicator& comm, F&& checks) {
  sciproxy::collective::on_every_rank(comm, std::forward<F>(checks));
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

template <class T, class CInput>
sciproxy_status state_shape_impl(const CInput* input, const sciproxy_scalar_options* options,
                                 int64_t* padded_shape) {
  return guarded([&] {
    require_pointer(padded_shape, "padded_shape");
    const auto in = input_of<T>(input);
    const auto opt = options_of(options, in.grid.ndim);
    const auto n = wv::scalar_state_shape<T>(in, opt.library);
    std::copy_n(n.begin(), in.grid.ndim, padded_shape);
  });
}

template <class T, class CInput, class CState>
sciproxy_status scalar_impl(const CInput* input, const sciproxy_scalar_options* options,
                            const CState* initial, T* receiver_amplitudes, CState* final_state) {
  return guarded([&] {
    wv::ScalarInput<T> in;
    Options opt;
    wv::ScalarState<T> start;
    checked_on_every_rank(comm_of(options), [&] {
      in = input_of<T>(input);
      opt = options_of(options, in.grid.ndim);
      if (in.nreceivers > 0 && receives_results(opt.library))
        require_pointer(receiver_amplitudes, "receiver_amplitudes");
      start = state_in<T>(initial, in.grid.ndim, in.nshots, "initial");
    });
    const auto out = wv::scalar<T>(opt.device, in, opt.library, initial ? &start : nullptr);
    if (!receives_results(opt.library)) return;
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
    state_out(out.state, in.grid.ndim, in.nshots, final_state);
  });
}

template <class T, class CInput, class CState>
sciproxy_status gradient_impl(const CInput* input, const sciproxy_scalar_options* options,
                              const CState* initial, const T* grad_receivers,
                              const CState* grad_final, T* grad_v, T* grad_source_amplitudes,
                              CState* grad_initial) {
  return guarded([&] {
    wv::ScalarInput<T> in;
    Options opt;
    std::span<const T> grad_r;
    wv::ScalarState<T> start, end;
    checked_on_every_rank(comm_of(options), [&] {
      require_pointer(grad_v, "grad_v");  // the model's gradient goes to every rank
      in = input_of<T>(input);
      grad_r =
          input_span(grad_receivers,
                     checked_product(in.nshots * in.nreceivers, in.nt, "grad_receiver_amplitudes"),
                     "grad_receiver_amplitudes");
      opt = options_of(options, in.grid.ndim);
      start = state_in<T>(initial, in.grid.ndim, in.nshots, "initial");
      end = state_in<T>(grad_final, in.grid.ndim, in.nshots, "grad_final");
    });
    const auto g = wv::scalar_gradient<T>(opt.device, in, opt.library, grad_r,
                                          initial ? &start : nullptr, grad_final ? &end : nullptr);
    copy_out(g.v, grad_v, "grad_v");
    if (!receives_results(opt.library)) return;
    if (grad_source_amplitudes)
      copy_out(g.source_amplitudes, grad_source_amplitudes, "grad_source_amplitudes");
    state_out(g.initial_state, in.grid.ndim, in.nshots, grad_initial);
  });
}

// Born: the background input plus the scatter and the background receivers.
template <class T, class CBornInput>
wv::ScalarBornInput<T> born_input_of(const CBornInput* c) {
  require_pointer(c, "input");
  wv::ScalarBornInput<T> b;
  b.background = input_of<T>(&c->background);
  sciproxy::require(c->nbg_receivers >= 0, "nbg_receivers", "0 or more",
                    std::to_string(c->nbg_receivers));
  b.scatter = optional_span(c->scatter, static_cast<std::int64_t>(b.background.v.size()));
  b.nbg_receivers = c->nbg_receivers;
  b.bg_receiver_locations = input_span(
      c->bg_receiver_locations,
      checked_product(checked_product(b.background.nshots, c->nbg_receivers, "nbg_receivers"),
                      b.background.grid.ndim, "bg_receiver_locations"),
      "bg_receiver_locations");
  return b;
}

template <class T, class CBornInput>
sciproxy_status born_impl(const CBornInput* input, const sciproxy_scalar_options* options,
                          T* receiver_amplitudes, T* bg_receiver_amplitudes) {
  return guarded([&] {
    wv::ScalarBornInput<T> born;
    Options opt;
    checked_on_every_rank(comm_of(options), [&] {
      born = born_input_of<T>(input);
      require_pointer(input->scatter, "scatter");
      opt = options_of(options, born.background.grid.ndim);
      if (!receives_results(opt.library)) return;
      if (born.background.nreceivers > 0)
        require_pointer(receiver_amplitudes, "receiver_amplitudes");
      if (born.nbg_receivers > 0) require_pointer(bg_receiver_amplitudes, "bg_receiver_amplitudes");
    });
    const auto out = wv::scalar_born<T>(opt.device, born, opt.library);
    if (!receives_results(opt.library)) return;
    copy_out(out.receiver_amplitudes, receiver_amplitudes, "receiver_amplitudes");
    copy_out(out.bg_receiver_amplitudes, bg_receiver_amplitudes, "bg_receiver_amplitudes");
  });
}

template <class T, class CBornInput>
sciproxy_status born_gradient_impl(const CBornInput* input, const sciproxy_scalar_options* options,
                                   const T* grad_receivers, const T* grad_bg_receivers,
                                   T* grad_scatter, T* grad_source_amplitudes) {
  return guarded([&] {
    wv::ScalarBornInput<T> born;
    Options opt;
    std::span<const T> grad_r, grad_bg;
    checked_on_every_rank(comm_of(options), [&] {
      require_pointer(grad_scatter, "grad_scatter");  // the image goes to every rank
      // The scatter matters only for the source gradient (NULL: zero).
      born = born_input_of<T>(input);
      const auto& in = born.background;
      grad_r = input_span(grad_receivers,
                          checked_product(checked_product(in.nshots, in.nreceivers, "nreceivers"),
                                          in.nt, "grad_receiver_amplitudes"),
                          "grad_receiver_amplitudes");
      if (grad_bg_receivers)
        grad_bg = input_span(
            grad_bg_receivers,
            checked_product(checked_product(in.nshots, born.nbg_receivers, "nbg_receivers"), in.nt,
                            "grad_bg_receiver_amplitudes"),
            "grad_bg_receiver_amplitudes");
      opt = options_of(options, in.grid.ndim);
    });
    const auto& in = born.background;
    // Every rank asks for the source gradient alike (the call compares it): a rank that does
    // not receive results may still pass its pointer or NULL.
    const auto g = wv::scalar_born_gradient<T>(opt.device, born, opt.library, grad_r, grad_bg,
                                               grad_source_amplitudes != nullptr);
    copy_out(g.scatter, grad_scatter, "grad_scatter");
    if (!receives_results(opt.library)) return;
    if (grad_source_amplitudes) {
      if (g.source_amplitudes.empty())  // no sources or no steps: the gradient is zero
        std::fill_n(grad_source_amplitudes, in.nshots * in.nsources * in.nt, T(0));
      else
        copy_out(g.source_amplitudes, grad_source_amplitudes, "grad_source_amplitudes");
    }
  });
}

}  // namespace

extern "C" {

void sciproxy_scalar_options_default(sciproxy_scalar_options* options) {
  if (!options) return;
  const wv::ScalarOptions d;
  *options = {};
  options->struct_size = sizeof(sciproxy_scalar_options);
  options->device = "auto";
  options->accuracy = d.accuracy;
  std::copy(d.pml_width.begin(), d.pml_width.end(), options->pml_width);
  options->pml_freq = d.pml_freq;
  options->max_vel = d.max_vel;
  std::copy(d.survey_pad.begin(), d.survey_pad.end(), options->survey_pad);
  options->has_origin = 0;
  options->model_gradient_sampling_interval = d.model_gradient_sampling_interval;
  options->freq_taper_frac = d.freq_taper_frac;
  options->time_pad_frac = d.time_pad_frac;
  options->time_taper = d.time_taper ? 1 : 0;
  options->storage = SCIPROXY_STORAGE_DEVICE;  // d.storage, the library's default
  options->storage_compression = d.storage_compression ? 1 : 0;
  options->storage_directory = nullptr;  // the system's temporary directory
  options->nparallel = d.nparallel;
  options->autotune = d.autotune ? 1 : 0;
  options->comm = SCIPROXY_NO_COMM;
  options->shots = static_cast<int>(d.shots);
  options->results = static_cast<int>(d.results);
}

#define SCIPROXY_SCALAR_C(T, S)                                                                    \
  sciproxy_status sciproxy_scalar_##S(                                                             \
      const sciproxy_scalar_input_##S* input, const sciproxy_scalar_options* options,              \
      const sciproxy_scalar_state_##S* initial, T* receiver_amplitudes,                            \
      sciproxy_scalar_state_##S* final_state) {                                                    \
    return scalar_impl<T>(input, options, initial, receiver_amplitudes, final_state);              \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_state_shape_##S(const sciproxy_scalar_input_##S* input,          \
                                                  const sciproxy_scalar_options* options,          \
                                                  int64_t* padded_shape) {                         \
    return state_shape_impl<T>(input, options, padded_shape);                                      \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_gradient_##S(                                                    \
      const sciproxy_scalar_input_##S* input, const sciproxy_scalar_options* options,              \
      const sciproxy_scalar_state_##S* initial, const T* grad_receiver_amplitudes,                 \
      const sciproxy_scalar_state_##S* grad_final, T* grad_v, T* grad_source_amplitudes,           \
      sciproxy_scalar_state_##S* grad_initial) {                                                   \
    return gradient_impl<T>(input, options, initial, grad_receiver_amplitudes, grad_final, grad_v, \
                            grad_source_amplitudes, grad_initial);                                 \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_born_##S(const sciproxy_scalar_born_input_##S* input,            \
                                           const sciproxy_scalar_options* options,                 \
                                           T* receiver_amplitudes, T* bg_receiver_amplitudes) {    \
    return born_impl<T>(input, options, receiver_amplitudes, bg_receiver_amplitudes);              \
  }                                                                                                \
  sciproxy_status sciproxy_scalar_born_gradient_##S(                                               \
      const sciproxy_scalar_born_input_##S* input, const sciproxy_scalar_options* options,         \
      const T* grad_receiver_amplitudes, const T* grad_bg_receiver_amplitudes, T* grad_scatter,    \
      T* grad_source_amplitudes) {                                                                 \
    return born_gradient_impl<T>(input, options, grad_receiver_amplitudes,                         \
                                 grad_bg_receiver_amplitudes, grad_scatter,                        \
                                 grad_source_amplitudes);                                          \
  }
SCIPROXY_SCALAR_C(float, f32)
SCIPROXY_SCALAR_C(double, f64)
#undef SCIPROXY_SCALAR_C

}  // extern "C"
