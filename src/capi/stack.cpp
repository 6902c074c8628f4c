// C ABI of the stack family (include/sciproxy/c/stack.h): extern "C" wrappers over
// sciproxy::stack::parstack, parstack_extent and argmax that never throw (guarded.hpp).
#include "sciproxy/stack.hpp"

#include <fmt/format.h>

#include <span>
#include <string>
#include <vector>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"

namespace {

using sciproxy::capi::guarded;
using sciproxy::capi::read_options;
using sciproxy::capi::require_pointer;

// The C input as the library's: one span per trace, which the library's input points at.
template <class T>
struct Traces {
  std::vector<std::span<const T>> spans;
  sciproxy::stack::ParstackInput<T> input;
};

template <class T, class CInput>
Traces<T> input_of(const CInput* c, bool with_weights) {
  require_pointer(c, "input");
  sciproxy::require(c->ntraces >= 1, "ntraces", "at least 1", std::to_string(c->ntraces));
  sciproxy::require(c->nshifts >= 1, "nshifts", "at least 1", std::to_string(c->nshifts));
  require_pointer(c->traces, "traces");
  require_pointer(c->lengths, "lengths");
  require_pointer(c->offsets, "offsets");
  require_pointer(c->shifts, "shifts");
  if (with_weights) require_pointer(c->weights, "weights");
  const auto nterms = static_cast<std::size_t>(
      sciproxy::capi::checked_product(c->ntraces, c->nshifts, "ntraces x nshifts"));
  Traces<T> t;
  t.spans.resize(static_cast<std::size_t>(c->ntraces));
  for (int64_t i = 0; i < c->ntraces; ++i) {
    sciproxy::require(c->lengths[i] >= 0, fmt::format("lengths[{}]", i), "a length >= 0",
                      std::to_string(c->lengths[i]));
    if (c->lengths[i] > 0) require_pointer(c->traces[i], "traces[i]");
    t.spans[i] = {c->traces[i], static_cast<std::size_t>(c->lengths[i])};
  }
  t.input.traces = t.spans;
  t.input.offsets = {c->offsets, static_cast<std::size_t>(c->ntraces)};
  t.input.shifts = {c->shifts, nterms};
  if (with_weights) t.input.weights = {c->weights, nterms};
  t.input.nshifts = c->nshifts;
  return t;
}

sciproxy_parstack_options read(const sciproxy_parstack_options* o) {
  return read_options(o, sciproxy_parstack_options_default, "sciproxy_parstack_options");
}

sciproxy::stack::ParstackOptions options_of(const sciproxy_parstack_options& c) {
  sciproxy::require(c.method == 0 || c.method == 1, "method",
                    "0 (stack) or 1 (maximum of the stack)", std::to_string(c.method));
  sciproxy::stack::ParstackOptions o;
  o.method = static_cast<sciproxy::stack::Method>(c.method);
  o.lengthout = c.lengthout;
  o.offsetout = c.offsetout;
  o.accumulate = c.accumulate != 0;
  o.clamp_max_at_zero = c.clamp_max_at_zero != 0;
  o.nparallel = c.nparallel > 0 ? c.nparallel : 0;
  o.autotune = c.autotune != 0;
  // The enums are checked by parstack itself, naming shift_sets and result_layout.
  o.shift_sets = static_cast<sciproxy::stack::ShiftSets>(c.shift_sets);
  o.result_layout = static_cast<sciproxy::stack::ResultLayout>(c.result_layout);
  return o;  // without the communicator: the callers below make it first, then agree on checks
}

// Runs the wrapper's own checks on every rank of comm, so that a null pointer on one rank fails
// every rank instead of leaving the others waiting in the call's first collective.
template <class F>
void checked_on_every_rank(const sciproxy::Communicator& comm, F&& checks) {
  sciproxy::collective::on_every_rank(comm, std::forward<F>(checks));
}

template <class T, class CInput>
sciproxy_status extent_impl(const CInput* input, const sciproxy_parstack_options* options,
                            int32_t* offsetout, int64_t* lengthout) {
  return guarded([&] {
    const auto c = read(options);
    auto opt = options_of(c);
    opt.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
    // Collective only when each rank passes its own shift sets (the window is every rank's).
    const auto& comm =
        opt.shift_sets == sciproxy::stack::ShiftSets::own ? opt.comm : sciproxy::Communicator();
    Traces<T> t;
    std::vector<T> ones;
    checked_on_every_rank(comm, [&] {
      require_pointer(offsetout, "offsetout");
      require_pointer(lengthout, "lengthout");
      t = input_of<T>(input, false);
      // Weights do not shape the window; unit weights let the shared checks run.
      ones.assign(static_cast<std::size_t>(t.input.shifts.size()), T(1));
      t.input.weights = ones;
    });
    const auto e = sciproxy::stack::parstack_extent(t.input, opt);
    *offsetout = e.offsetout;
    *lengthout = e.lengthout;
  });
}

template <class T, class CInput>
sciproxy_status parstack_impl(const CInput* input, const sciproxy_parstack_options* options,
                              T* result, int64_t result_size, int32_t* offsetout,
                              int64_t* lengthout) {
  return guarded([&] {
    const auto c = read(options);
    auto opt = options_of(c);
    opt.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
    Traces<T> t;
    sciproxy::Device dev;
    checked_on_every_rank(opt.comm, [&] {
      // A rank receiving no rows (result_layout 1 off rank 0) may pass NULL and 0.
      if (result_size != 0) require_pointer(result, "result");
      sciproxy::require(result_size >= 0, "result_size", "a size >= 0",
                        std::to_string(result_size));
      t = input_of<T>(input, true);
      dev = sciproxy::capi::device_of(c.device);
    });
    const auto e = sciproxy::stack::parstack<T>(
        dev, t.input, {result, static_cast<std::size_t>(result_size)}, opt);
    if (offsetout) *offsetout = e.offsetout;
    if (lengthout) *lengthout = e.lengthout;
  });
}

template <class T, class CInput>
sciproxy_status argmax_impl(const CInput* input, const sciproxy_argmax_options* options,
                            uint32_t* out) {
  return guarded([&] {
    const auto c =
        read_options(options, sciproxy_argmax_options_default, "sciproxy_argmax_options");
    require_pointer(input, "input");
    require_pointer(input->a, "a");
    require_pointer(out, "out");
    sciproxy::require(input->rows >= 1 && input->cols >= 1, "rows, cols", "both at least 1",
                      fmt::format("{}, {}", input->rows, input->cols));
    const auto size = sciproxy::capi::checked_product(input->rows, input->cols, "rows x cols");
    sciproxy::stack::argmax<T>({input->a, static_cast<std::size_t>(size)}, input->rows, input->cols,
                               {out, static_cast<std::size_t>(input->cols)},
                               c.nparallel > 0 ? c.nparallel : 0, c.pyrocko_compat != 0);
  });
}

}  // namespace

extern "C" {

void sciproxy_parstack_options_default(sciproxy_parstack_options* options) {
  if (!options) return;
  const sciproxy::stack::ParstackOptions d;
  *options = {};
  options->struct_size = sizeof(sciproxy_parstack_options);
  options->device = "auto";
  options->method = static_cast<int>(d.method);
  options->offsetout = d.offsetout;
  options->lengthout = d.lengthout;
  options->accumulate = d.accumulate ? 1 : 0;
  options->clamp_max_at_zero = d.clamp_max_at_zero ? 1 : 0;
  options->nparallel = d.nparallel;
  options->autotune = d.autotune ? 1 : 0;
  options->comm = SCIPROXY_NO_COMM;
  options->shift_sets = static_cast<int>(d.shift_sets);
  options->result_layout = static_cast<int>(d.result_layout);
}

void sciproxy_argmax_options_default(sciproxy_argmax_options* options) {
  if (!options) return;
  *options = {};
  options->struct_size = sizeof(sciproxy_argmax_options);
  options->nparallel = 0;
  options->pyrocko_compat = 0;
}

sciproxy_status sciproxy_parstack_extent_f64(const sciproxy_parstack_input_f64* input,
                                             const sciproxy_parstack_options* options,
                                             int32_t* offsetout, int64_t* lengthout) {
  return extent_impl<double>(input, options, offsetout, lengthout);
}
sciproxy_status sciproxy_parstack_extent_f32(const sciproxy_parstack_input_f32* input,
                                             const sciproxy_parstack_options* options,
                                             int32_t* offsetout, int64_t* lengthout) {
  return extent_impl<float>(input, options, offsetout, lengthout);
}

sciproxy_status sciproxy_parstack_f64(const sciproxy_parstack_input_f64* input,
                                      const sciproxy_parstack_options* options, double* result,
                                      int64_t result_size, int32_t* offsetout, int64_t* lengthout) {
  return parstack_impl<double>(input, options, result, result_size, offsetout, lengthout);
}
sciproxy_status sciproxy_parstack_f32(const sciproxy_parstack_input_f32* input,
                                      const sciproxy_parstack_options* options, float* result,
                                      int64_t result_size, int32_t* offsetout, int64_t* lengthout) {
  return parstack_impl<float>(input, options, result, result_size, offsetout, lengthout);
}

sciproxy_status sciproxy_parstack_shift_block(int64_t nshifts,
                                              const sciproxy_parstack_options* options,
                                              int64_t* first, int64_t* count, int64_t* total) {
  return guarded([&] {
    const auto c = read(options);
    auto opt = options_of(c);
    opt.comm = sciproxy::Communicator::from_handle(c.comm, "options.comm");
    const auto& comm =
        opt.shift_sets == sciproxy::stack::ShiftSets::own ? opt.comm : sciproxy::Communicator();
    checked_on_every_rank(comm, [&] {
      require_pointer(first, "first");
      require_pointer(count, "count");
      require_pointer(total, "total");
      sciproxy::require(nshifts >= 0, "nshifts", "0 or more", std::to_string(nshifts));
    });
    const auto b = sciproxy::stack::parstack_shift_block(nshifts, opt);
    *first = b.first;
    *count = b.count;
    *total = b.total;
  });
}

sciproxy_status sciproxy_argmax_f64(const sciproxy_argmax_input_f64* input,
                                    const sciproxy_argmax_options* options, uint32_t* out) {
  return argmax_impl<double>(input, options, out);
}
sciproxy_status sciproxy_argmax_f32(const sciproxy_argmax_input_f32* input,
                                    const sciproxy_argmax_options* options, uint32_t* out) {
  return argmax_impl<float>(input, options, out);
}

}  // extern "C"
