// tti: the coupled P/M self-adjoint pseudo-acoustic TTI system with variable density of Bube,
// Washbourne, Ergas and Nemeth (2016, SEG), as in ChevronETC/WaveFD.jl
// (prop3DAcoTTIDenQ_DEO2_FDTD); see docs/kernels/tti.md.
//
//   b/vp^2 (d_tt P + (w/Q) d_t P) = div[ b(1+2eps) grad P - b(2eps + f eta^2) n (n . grad P)
//                                         + b f eta sqrt(1-eta^2) n (n . grad M) ] + s
//   b/vp^2 (d_tt M + (w/Q) d_t M) = div[ b(1-f) grad M + b f eta^2 n (n . grad M)
//                                         + b f eta sqrt(1-eta^2) n (n . grad P) ] + s
//   n = (cos theta, sin theta sin phi, sin theta cos phi) along the axes (0, 1, 2) = (z, y, x),
//   eta^2 = 2 (eps - delta) / (f + 2 eps),  f = 1 - vs^2 / vp^2,  w = 2 pi freq_q.
//
// Discretisation: staggered first derivatives of order 4, 8, 12 or 16 (D+ on the fields, the
// material tensors, D- = -(D+)^T for the divergence, src/tti/math.hpp), so the spatial
// operator L is symmetric; leapfrog in time with d = dt w / Q:
//   u^{t+1} = (2 - d) u^t + (d - 1) u^{t-1} + (dt^2 vp^2 / b) (L u^t + s^t)     (u = P and M)
// The sponge adds sponge_width cells outside the model per side (material replicated), with Q
// rising log-linearly from q_min at the outer edge to q_interior at the model (WaveFD's
// profile). The free surface (optional) is the plane of the first model cell of axis 0: P = M = 0
// there, P and M odd and the axis-0 fluxes even about it (the mirror / image method of WaveFD),
// which keeps L exactly symmetric. Sources inject s into P and M at cells; receivers record P
// before each step (the scalar propagator's convention). The adjoint takes receiver data and
// returns the gradient with respect to the source amplitudes: the same stencil run backward in
// time from the receivers (the exact transpose of the discrete forward map).
//
// Arrays are row-major (C order), axis 2 contiguous; locations are cell indices
// [shot, source or receiver, axis] into the model. Angles are in radians.
//
// Long calls stop between steps when asked (sciproxy/core/cancel.hpp): they throw Cancelled and
// their outputs are unspecified.
//
// Under MPI (TtiOptions::comm of several ranks; docs/kernels/tti.md, "Under MPI"): every rank
// passes the same whole inputs (model, time axis, traces, locations, options; checked, and
// ranks that disagree get the same InvalidArgument on every rank). The padded grid (model and
// sponge) is split into a Cartesian grid of subdomains, one per rank (process_grid); each rank
// steps its own cells, exchanging halos of space_order/2 cells of P and M and of the fluxes with
// its neighbours every step while it computes its interior. A source is injected and a receiver
// recorded by the rank holding its cell; receiver_amplitudes (and the adjoint's
// source_amplitudes) are whole on every rank. The results are bit for bit one process's (every
// cell's arithmetic is the same). The cpu backend only: other devices are an InvalidArgument.
// Cancelling one rank alone leaves the others waiting: cancel every rank.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/seismic.hpp"

namespace sciproxy::tti {

using seismic::Grid;
using seismic::kIgnoreLocation;
using seismic::kMaxDims;

// The earth model on the cells of grid (grid.ndim must be 3). Every array is [cells] or empty,
// where empty means: b = 1, epsilon = delta = theta = phi = 0, f = TtiOptions::default_f.
template <class T>
struct TtiModel {
  Grid grid{3, {1, 1, 1}, {1, 1, 1}};
  std::span<const T> vp;        // m/s, > 0 (required)
  std::span<const T> buoyancy;  // b = 1 / rho, > 0
  std::span<const T> epsilon, delta;
  std::span<const T> theta, phi;  // tilt from axis 0, azimuth from axis 2 towards axis 1
  std::span<const T> f;           // 1 - vs^2 / vp^2, in (0, 1]
};

struct TtiOptions {
  int space_order = 8;  // 4, 8, 12 or 16
  // Sponge cells added outside the model per side: {axis0 low, axis0 high, axis1 low, ...}.
  // With free_surface the axis-0 low side has none (that entry is ignored).
  std::array<std::int64_t, 6> sponge_width = {60, 60, 60, 60, 60, 60};
  double q_min = 0.1;       // Q at the outer edge of the sponge
  double q_interior = 100;  // Q in the model (+infinity: no attenuation)
  double freq_q = 5;        // Hz, w = 2 pi freq_q
  double default_f = 0.85;  // f where TtiModel::f is empty
  bool free_surface = false;
  int nparallel = 0;  // OpenMP threads for the cpu backend; 0: all (per rank under MPI)
  // The ranks the call runs on (default: this process alone), and the ranks per axis of their
  // Cartesian grid: entries 0 are chosen (as MPI_Dims_create) to exchange the fewest halo cells.
  // A grid whose product is not the ranks, or that leaves a rank fewer than space_order/2 cells
  // (of model and sponge) along a split axis, is an InvalidArgument naming process_grid.
  Communicator comm;
  std::array<int, 3> process_grid = {0, 0, 0};
};

template <class T>
struct TtiInput {
  TtiModel<T> model;
  double dt = 0;        // seconds; beyond the stability limit is an error
  std::int64_t nt = 0;  // time samples (0: from the source or receiver amplitudes)
  std::int64_t nshots = 1;
  std::int64_t nsources = 0;                         // per shot
  std::int64_t nreceivers = 0;                       // per shot
  std::span<const T> source_amplitudes;              // [nshots, nsources, nt] (forward)
  std::span<const std::int64_t> source_locations;    // [nshots, nsources, 3]
  std::span<const std::int64_t> receiver_locations;  // [nshots, nreceivers, 3]
};

// P and M at two consecutive steps on the padded grid ([halo | sponge | model | sponge | halo]
// per axis, halo = space_order / 2), each [nshots, *padded_shape].
//
// Under MPI a returned state is the rank's subdomain: the window [subdomain_origin,
// subdomain_origin + padded_shape) of the padded grid, its own cells with a halo of space_order/2
// per side, where the cells of other ranks are zero (and model_offset may be negative). It can
// start the next call on the same ranks as is; an initial state on the whole padded grid
// (padded_shape the whole grid's, the same on every rank) is read by each rank in its window.
template <class T>
struct TtiState {
  std::array<std::int64_t, 3> padded_shape = {1, 1, 1};
  std::array<std::int64_t, 3> model_offset = {0, 0, 0};      // index of model cell (0, 0, 0)
  std::array<std::int64_t, 3> subdomain_origin = {0, 0, 0};  // padded index of index (0, 0, 0)
  std::vector<T> p, p_prev, m, m_prev;
  bool empty() const { return p.empty(); }
};

template <class T>
struct TtiOutput {
  std::vector<T> receiver_amplitudes;  // [nshots, nreceivers, nt]
  TtiState<T> state;                   // after the last step
  WorkModel work;
};

template <class T>
struct TtiAdjointOutput {
  std::vector<T> source_amplitudes;  // [nshots, nsources, nt]: d<receivers, data> / d amplitudes
  WorkModel work;
};

// Largest stable dt: 1 / (sum_k |c_k| sqrt(sum_a 1/h_a^2) max_cells vp sqrt(lambda_max)), with
// lambda_max = max(1 + 2 eps, 1) the largest eigenvalue of the material tensor over b.
template <class T>
double tti_max_dt(const TtiModel<T>& model, const TtiOptions& opt);

// Forward modelling (tti_forward: the namespace sciproxy::tti holds the shared
// arithmetic); `initial` (optional) is the state to start from (default: at rest).
template <class T>
TtiOutput<T> tti_forward(const Device& device, const TtiInput<T>& in, const TtiOptions& opt,
                         const TtiState<T>* initial = nullptr, Timers* timers = nullptr);

// Adjoint of tti (from rest) with respect to the source amplitudes: receiver_data
// [nshots, nreceivers, nt] is injected at the receivers, backward in time; in.source_amplitudes
// is not read.
template <class T>
TtiAdjointOutput<T> tti_adjoint(const Device& device, const TtiInput<T>& in,
                                std::span<const T> receiver_data, const TtiOptions& opt,
                                Timers* timers = nullptr);

}  // namespace sciproxy::tti
