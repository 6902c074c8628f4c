// wave: the scalar propagator's problem on the padded grid, shared by the entry points of
// api.cpp and born.cpp: the checked arguments, the survey window and padded model (window.cpp),
// sources and receivers in inner time steps (traces.cpp) and the work model (api.cpp). See
// docs/kernels/scalar-wave.md.
//
// The padded grid per dimension is [halo | PML low | survey window | PML high | halo], with the
// window replicate-padded into PML and halo (kernels.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/recorded_call.hpp"
#include "kernels.hpp"
#include "resample.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/wave.hpp"
#include "seismic/checks.hpp"

namespace sciproxy::wave::detail {

using Shape = std::array<std::int64_t, kMaxDims>;
using seismic::is_ignored;

// Where ignored sources and receivers point on the padded grid: the first halo cell, which every
// wavefield keeps at zero, so they record zeros; their source amplitudes and receiver gradients
// are zeroed here, so nothing is ever injected there.
constexpr std::int64_t kIgnoredCell = 0;

// "1, 2, 3": the first n entries of x joined by sep.
std::string join(const std::int64_t* x, int n, const char* sep);

void check_dt(double dt);
void check_max_vel(double max_vel);

// ---------------------------------------------------------------------------------------------
// The padded problem

template <class T>
struct Setup {
  int ndim = 1, accuracy = 4;
  std::int64_t halo = 2;
  std::int64_t nshots = 1, nmodels = 1, nsources = 0, nreceivers = 0;
  std::int64_t nt = 0, nt_inner = 0, step_ratio = 1;
  double inner_dt = 0, max_vel = 0;
  Shape model_shape = {1, 1, 1};
  Shape begin = {0, 0, 0}, end = {1, 1, 1};  // survey window in model cells, [begin, end)
  Shape offset = {0, 0, 0};                  // padded index of the window's first cell
  Shape n = {1, 1, 1};                       // padded shape
  std::array<std::int64_t, 2 * kMaxDims> pml_width = {0, 0, 0, 0, 0, 0};
  std::int64_t points = 1;
  std::int64_t model_cells = 1;
  std::vector<T> v;  // padded: [nmodels, points]
  std::array<std::vector<T>, kMaxDims> a, b, dbdx;
  std::vector<std::int64_t> source_cells, receiver_cells;  // flat padded indices
  detail::Resampling resampling;
  kernels::ScalarProblem<T> problem;

  std::int64_t model_of(std::int64_t shot) const { return nmodels == 1 ? 0 : shot; }
  // Model cell whose value padded cell p carries (replicate padding of the window).
  std::int64_t model_cell(const Shape& p) const {
    std::int64_t c = 0;
    for (int d = 0; d < kMaxDims; ++d)
      c = c * model_shape[d] + std::clamp(p[d] - offset[d] + begin[d], begin[d], end[d] - 1);
    return c;
  }
  template <class F>
  void for_each_padded(F&& f) const {
    for (std::int64_t i0 = 0; i0 < n[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < n[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < n[2]; ++i2)
          f((i0 * n[1] + i1) * n[2] + i2, Shape{i0, i1, i2});
  }
  std::int64_t padded_cell(const std::int64_t* loc) const {
    if (is_ignored(loc, ndim)) return kIgnoredCell;
    std::int64_t c = 0;
    for (int d = 0; d < kMaxDims; ++d)
      c = c * n[d] + (d < ndim ? loc[d] - begin[d] + offset[d] : 0);
    return c;
  }
};

// Which state an error is about. Errors name its fields as the API does (Deepwave's names):
// wavefield_0, wavefield_m1, psi<d>_m1 and zeta<d>_m1 with d the z, y, x of the last ndim
// dimensions; _sc before the time suffix for Born's scattered field; grad_final_state['...'] for
// the gradient with respect to the final state.
enum class StateRole { initial, initial_scattered, grad_final };

// Fills s in place: s.problem points into s's own arrays. Checks every argument; `initial` (a
// state to continue, of `role`) may fix the survey window. Refuses (OutOfMemory), before it
// allocates, a call whose host memory (host_bytes) exceeds what the process may allocate;
// `wavefields` is 2 for Born (background and scattered), else 1.
template <class T>
void make_setup(Setup<T>& s, const ScalarInput<T>& in, const ScalarOptions& opt,
                std::int64_t store_interval, const ScalarState<T>* initial,
                StateRole role = StateRole::initial, int wavefields = 1);

// The host memory a call holds at its peak, from the sizes of s (no array of s need exist):
// the padded model, the state per wavefield (u, u_prev, psi and zeta per dimension) and the
// returned copy of it, the traces in inner and outer steps, and for a gradient
// (store_interval > 0) the adjoint state, the padded gradient and what GradientStore keeps in
// memory (storage_mode device/host: every stored step, 1 byte per cell plus a scale per block
// when compressed; disk: a chunk); with autotune, one more state (the trials' copy).
template <class T>
double host_bytes(const Setup<T>& s, const ScalarOptions& opt, std::int64_t store_interval,
                  int wavefields);

// Whether st holds any field of the first ndim dimensions.
template <class T>
bool has_fields(const ScalarState<T>* st, int ndim);

// The state the kernels assume: zero in the halo, psi and zeta zero outside their PML slabs.
template <class T>
void project_state(const Setup<T>& s, ScalarState<T>& st);

// A full, checked, projected state on the padded grid from an optional one (any field may be
// empty: zero); errors name its fields as `role` says.
template <class T>
ScalarState<T> make_state(const Setup<T>& s, const ScalarState<T>* given, StateRole role);

template <class T>
kernels::ScalarFields<T> fields_of(const Setup<T>& s, ScalarState<T>& st);

// ScalarOptions::autotune on the cpu backend: the forward's steps per sweep with its tiles per
// thread (3-D) or rows per block (2-D), timed by `trial` over a few steps of this problem
// (sciproxy/core/autotune.hpp; `trial` runs the forward of the problem it is given on copies of
// the call's fields and leaves them untouched). The choice goes into s.problem.cpu, which the
// backward pass shares. `kernel` names the cache entry ("scalar_forward", "scalar_born_forward").
template <class T>
void autotune_forward(const Device& device, Setup<T>& s, const char* kernel,
                      const std::function<void(const kernels::ScalarProblem<T>&)>& trial);

// Scaled inner sources [nt_inner, nshots, nsources] = -v_s^2 dt^2 upsample(amplitudes); the
// upsampled amplitudes [nshots * nsources, nt_inner] go to inner_out when given.
template <class T>
std::vector<T> scaled_sources(const Setup<T>& s, std::span<const T> amplitudes,
                              std::vector<T>* inner_out);

// [nt_inner, nshots, nreceivers] -> [nshots, nreceivers, nt], and its adjoint.
template <class T>
std::vector<T> receivers_out(const Setup<T>& s, const std::vector<T>& tm);
template <class T>
std::vector<T> receivers_in_adjoint(const Setup<T>& s, std::span<const T> grad);

// The same for `count` traces per shot at `cells` (Born's two sets of receivers).
template <class T>
std::vector<T> traces_out(const Setup<T>& s, std::int64_t count, const std::vector<T>& tm);
template <class T>
std::vector<T> traces_in_adjoint(const Setup<T>& s, std::int64_t count, const std::int64_t* cells,
                                 std::span<const T> grad);

// Points, flops and the bytes that one forward pass on `backend` moves, of `wavefields` fields
// (Born: 2; its flops are born.cpp's), and those of scalar_gradient's forward and adjoint passes
// (api.cpp).
template <class T>
WorkModel work_model(const Setup<T>& s, std::int64_t store_interval, Backend backend,
                     int wavefields = 1);
template <class T>
WorkModel gradient_work(const Setup<T>& s, std::int64_t store_interval, Backend backend);

// What a recorded call reports besides its work: the sizes and options (api.cpp).
template <class T>
void set_parameters(RecordedCall& call, const Setup<T>& s, const ScalarOptions& opt);

// Records the comparison of every field of a state with the reference's, by the Python API's
// names (wavefield<suffix>_0, ..., psi<d><suffix>_m1, ...), each written wrap[0] + name +
// wrap[1] (api.cpp).
template <class T>
void compare_state(RecordedCall& call, const ScalarState<T>& got, const ScalarState<T>& expected,
                   int ndim, const std::string& suffix, const Tolerance& tolerance,
                   const std::array<std::string, 2>& wrap);

// scalar_gradient without its RecordedCall, for scalar_born_gradient (whose image it is); sets
// the work and parameters of `call` when given (api.cpp).
template <class T>
ScalarGradient<T> gradient(const Context& context, const ScalarInput<T>& in,
                           const ScalarOptions& opt, std::span<const T> grad_receiver_amplitudes,
                           const ScalarState<T>* initial, const ScalarState<T>* grad_final,
                           RecordedCall* call);

}  // namespace sciproxy::wave::detail
