// The backend kernels of the wave family (the scalar propagator), declared once for the
// reference, cpu and cuda backends (core/dispatch.hpp): reference.cpp, cpu_*.cpp and cuda_*.cu
// implement them; core/cuda_stubs.cpp supplies the cuda ones in builds without CUDA. api.cpp and
// born.cpp check the arguments, pad the model (window.cpp), build the PML profiles, resample and
// scale the sources, and hand every backend the same ScalarProblem on the padded grid
// (SCIPROXY_RUN_KERNEL). See docs/kernels/scalar-wave.md.
//
// Padded grid, per dimension d (size n[d]):  [halo | PML low | model window | PML high | halo],
// halo = accuracy/2 cells that every wavefield keeps at zero (so stencils need no bounds checks).
// Flat index of cell (i0, i1, i2) = (i0 * n[1] + i1) * n[2] + i2 (unused dimensions have n = 1).
//
// One inner step t -> t+1 (all shots, every cell outside the halo), per dimension x with
// D1 / D2 the central first / second derivative stencils (math.hpp):
//   tmp_x    = (1 + b_x) D2_x u^t + b'_x D1_x u^t + D1_x(a_x psi_x^t)
//   W        = sum_x (1 + b_x) tmp_x + a_x zeta_x^t
//   psi_x^{t+1}  = b_x D1_x u^t + a_x psi_x^t,     zeta_x^{t+1} = b_x tmp_x + a_x zeta_x^t
//   u^{t+1}  = v^2 dt^2 W + 2 u^t - u^{t-1},  then u^{t+1}[source] += scaled_source^t
//   receivers^t = u^t[receiver]  (before the step)
// where a = b = b' = 0 outside the PML, so that W is the plain Laplacian there. psi and zeta are
// only non-zero within pml_interior of the edges; backends may skip them in the interior box.
//
// Born (linearised) modelling steps a background field u and a scattered field u_sc together;
// u_sc is the exact derivative of u in the direction `scatter` of v (the PML profiles, max_vel
// and the step ratio held fixed), so its auxiliaries follow the same linear updates:
//   u_sc^{t+1} = v^2 dt^2 W(u_sc; psi_sc, zeta_sc) + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 W(u),
//   then u_sc^{t+1}[source] += scaled_scattered_source^t   (-2 v scatter dt^2 f: the derivative
//   of the background's -v^2 dt^2 f);   receivers^t = u_sc^t[receiver],  bg^t = u^t[bg receiver].
// Its adjoint (with respect to the sources and the states): the scattered adjoint lambda_sc is the
// plain adjoint; the background adjoint lambda is the plain adjoint with
// g = v^2 dt^2 lambda + 2 v scatter dt^2 lambda_sc in place of v^2 dt^2 lambda (the coupling term
// feeds W(u), whose transpose the adjoint applies to g). The velocity gradient of the Born data
// (the migration image, with respect to scatter) is scalar_backward's grad_v driven by lambda_sc.
#pragma once

#include <array>
#include <cstdint>

#include "core/dispatch.hpp"
#include "sciproxy/wave.hpp"

namespace sciproxy::wave::kernels {

// What every kernel is compiled for: the stencil accuracies and the numbers of dimensions (the
// loops are unrolled per pair); with_value() maps the run-time values onto them.
using Accuracies = ValueList<2, 4, 6, 8>;
using Dimensions = ValueList<1, 2, 3>;

template <class T>
struct ScalarProblem {
  int ndim = 2;
  int accuracy = 4;
  int nparallel = 0;    // OpenMP threads of the cpu backend; 0: all
  ScalarCpuTuning cpu;  // the cpu backend's block sizes
  std::int64_t nshots = 1;
  std::array<std::int64_t, kMaxDims> n = {1, 1, 1};  // padded shape; unused dimensions are 1
  std::int64_t points() const { return n[0] * n[1] * n[2]; }
  std::array<T, kMaxDims> rdx = {0, 0, 0};   // 1 / spacing
  std::array<T, kMaxDims> rdx2 = {0, 0, 0};  // 1 / spacing^2
  T dt2 = 0;                                 // inner dt^2
  const T* v = nullptr;  // padded model: [nshots, points] when v_batched, else [points]
  bool v_batched = false;
  // PML profiles along each dimension, length n[d]; zero outside the PML.
  std::array<const T*, kMaxDims> a = {}, b = {}, dbdx = {};
  // Per dimension, the cells [pml_interior[2d], pml_interior[2d+1]) where a, b, b', psi and zeta,
  // and the a*psi of every stencil neighbour, are all zero: there W is the plain Laplacian.
  // The adjoint also reads b and b' at the neighbours, so its plain range is this box narrowed
  // by accuracy/2 per side (the backends narrow it themselves).
  std::array<std::int64_t, 2 * kMaxDims> pml_interior = {0, 1, 0, 1, 0, 1};
  std::int64_t nsources = 0, nreceivers = 0;     // per shot
  const std::int64_t* source_cells = nullptr;    // [nshots, nsources] flat padded index
  const std::int64_t* receiver_cells = nullptr;  // [nshots, nreceivers] flat padded index
  std::int64_t nt = 0;                           // inner steps
  // Store 2 v dt^2 W (= d u^{t+1} / d v) at inner steps t with t % store_interval == 0
  // (store_interval 0: store nothing).
  std::int64_t store_interval = 0;
  // Born only: the padded scatter, laid out as v (v_batched applies), and the cells of the
  // receivers of the background field, [nshots, nbg_receivers].
  const T* scatter = nullptr;
  std::int64_t nbg_receivers = 0;
  const std::int64_t* bg_receiver_cells = nullptr;
};

// Wavefields of all shots, each [nshots, points]; psi and zeta of the first ndim dimensions.
template <class T>
struct ScalarFields {
  T* u = nullptr;       // u^t  (in: u^0, out: u^nt)
  T* u_prev = nullptr;  // u^{t-1}
  std::array<T*, kMaxDims> psi = {}, zeta = {};
};

// The kernels (all take the call's Context first; the cuda ones record the regions "upload",
// "steps", "download" in context.timers with CUDA events and keep all shots resident on the
// device for the whole call, taking host arrays in and out as the host backends do).
//
// scalar_forward: nt inner steps. sources: [nt, nshots, nsources] already scaled
// (-v^2 dt^2 f); receivers: [nt, nshots, nreceivers] written; stored: [nt / store_interval
// rounded up, nshots, points] written when store_interval > 0 (the steps t with
// t % store_interval == 0).
#define SCIPROXY_WAVE_SCALAR_FORWARD(T)                                                          \
  void scalar_forward(const Context& context, const ScalarProblem<T>& p, ScalarFields<T> fields, \
                      const T* sources, T* receivers, T* stored)

// scalar_backward: the exact adjoint of scalar_forward, steps nt-1 down to 0. `fields` holds on
// entry the gradient with respect to the final state (u^nt, u^{nt-1}, psi^nt, zeta^nt) and on
// exit the gradient with respect to the initial state. grad_receivers: [nt, nshots, nreceivers]
// in; grad_sources: [nt, nshots, nsources] out (with respect to the scaled sources); grad_v:
// [nshots or 1, points] accumulated (+=) from `stored`, times store_interval.
#define SCIPROXY_WAVE_SCALAR_BACKWARD(T)                                                          \
  void scalar_backward(const Context& context, const ScalarProblem<T>& p, ScalarFields<T> fields, \
                       const T* grad_receivers, T* grad_sources, const T* stored, T* grad_v)

// scalar_born_forward: background `bg` and scattered `sc` fields stepped together (see the top).
// sources, scattered_sources: [nt, nshots, nsources], already scaled (-v^2 dt^2 f,
// -2 v scatter dt^2 f); receivers: [nt, nshots, nreceivers] of u_sc; bg_receivers:
// [nt, nshots, nbg_receivers] of u.
#define SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T)                                                      \
  void scalar_born_forward(const Context& context, const ScalarProblem<T>& p, ScalarFields<T> bg, \
                           ScalarFields<T> sc, const T* sources, const T* scattered_sources,      \
                           T* receivers, T* bg_receivers)

// scalar_born_backward: the exact adjoint of scalar_born_forward with respect to the sources and
// the states (bg, sc: in the gradients with respect to the final states, out those with respect
// to the initial ones). grad_receivers: [nt, nshots, nreceivers], grad_bg_receivers: [nt, nshots,
// nbg_receivers] in; grad_sources, grad_scattered_sources: [nt, nshots, nsources] out (with
// respect to the scaled background and scattered sources: lambda and lambda_sc at the sources).
#define SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T)                                                      \
  void scalar_born_backward(const Context& context, const ScalarProblem<T>& p, ScalarFields<T> bg, \
                            ScalarFields<T> sc, const T* grad_receivers,                           \
                            const T* grad_bg_receivers, T* grad_sources,                           \
                            T* grad_scattered_sources)

#define SCIPROXY_WAVE_KERNELS           \
  template <class T>                    \
  SCIPROXY_WAVE_SCALAR_FORWARD(T);      \
  template <class T>                    \
  SCIPROXY_WAVE_SCALAR_BACKWARD(T);     \
  template <class T>                    \
  SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T); \
  template <class T>                    \
  SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T);

SCIPROXY_DECLARE_KERNELS(SCIPROXY_WAVE_KERNELS)

}  // namespace sciproxy::wave::kernels
