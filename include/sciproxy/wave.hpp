// wave: constant-density scalar wave propagation with exact adjoint gradients (the job of
// Deepwave's scalar propagator, ar4/deepwave src/deepwave/scalar.py and scalar.c).
//
//   u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t,     r^t = u^t at the receivers
//
// L: central second-derivative stencils of accuracy 2, 4, 6 or 8 in 1, 2 or 3 dimensions, with
// the convolutional PML of Pasalic and McGarry (2010) on every side (auxiliary fields psi, zeta);
// the model is replicate-padded into the PML. A dt beyond the stability limit is resampled: the
// propagator takes step_ratio inner steps per dt, sources are upsampled and receivers
// downsampled in the frequency domain. See docs/kernels/scalar-wave.md.
//
// Arrays are row-major (C order), the last dimension contiguous; locations are cell indices
// [shot, source or receiver, dim] into the model (not the padded grid), or kIgnoreLocation.
//
// Long calls stop between steps when asked (sciproxy/core/cancel.hpp): they throw Cancelled and
// their outputs are unspecified.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/seismic.hpp"

namespace sciproxy::wave {

using seismic::Grid;
using seismic::kIgnoreLocation;
using seismic::kMaxDims;

// What the backward pass keeps of the forward one: 2 v dt^2 L u^t at every stored step.
enum class StorageMode {
  device,  // meant: in the memory of the device that propagates (host memory for the host
           // backends). The cuda backend does not do so yet: between its two passes it keeps
           // the store in host memory as `host` does (docs/kernels/scalar-wave.md)
  host,    // in host memory (pageable)
  disk,    // one nameless temporary file per shot in storage_directory (nothing left behind)
  none,    // nothing: no velocity gradient
};

// The sizes that set the cpu backend's speed, never its results (every setting gives the same
// bits): gathered here so that a tuner can search them; the defaults are good on the machines
// measured (bench/scalar_cpu_notes.md). Values below 1 count as 1.
struct ScalarCpuTuning {
  // Time steps per sweep over the grid (temporal blocking of the forward): a sweep streams the
  // fields from memory once. Used by every 3-D shot and by the 2-D shots that a thread runs alone.
  std::int64_t sweep_steps = 4;
  // 3-D: a sweep gets fewer steps where the planes it keeps in cache (the stencil's and, per
  // extra step, h + 1 more) would take more than this many bytes. Generous: at 256^3 + PML, 34 MB
  // per sweep (more than the 32 MiB L3), 4 steps still beat 1 by 13%.
  std::int64_t sweep_cache_bytes = std::int64_t(64) << 20;
  // 3-D forward: tiles of rows per plane and thread (each thread keeps its rows through a sweep).
  std::int64_t tiles_per_thread = 1;
  // 2-D: rows of the outermost dimension per work item.
  std::int64_t rows_per_block = 4;
  // Shots that share the threads go in batches of about this many bytes of fields per thread.
  std::int64_t batch_bytes_per_thread = 2 << 20;
  // Rows ahead at which the forward prefetches the contiguous dimension's PML strips.
  std::int64_t prefetch_rows = 4;
};

struct ScalarOptions {
  int accuracy = 4;  // 2, 4, 6 or 8
  // PML width in cells per side: {dim0 low, dim0 high, dim1 low, ...}; only the first 2*ndim used.
  std::array<std::int64_t, 2 * kMaxDims> pml_width = {20, 20, 20, 20, 20, 20};
  double pml_freq = 25;  // Hz; Deepwave's default (it warns when it is not given)
  // Model only a window of v: the cells spanned by the sources and receivers, widened by this
  // many cells per side (Deepwave's survey_pad; -1: to the edge of the model on that side).
  // All -1 (the default): the whole model.
  std::array<std::int64_t, 2 * kMaxDims> survey_pad = {-1, -1, -1, -1, -1, -1};
  // With an initial state (and survey_pad all -1), the window is the state's padded shape less
  // PML and halo, starting at this model cell (Deepwave's origin; none: the first cell).
  std::optional<std::array<std::int64_t, kMaxDims>> origin;
  double max_vel = 0;  // m/s for the PML profiles and the CFL limit; 0: max |v|
  // Store what the gradient needs every this many inner steps. 1 (the default) gives the exact
  // gradient; Deepwave stores every step_ratio * interval inner steps, an approximation when
  // the time step is resampled.
  std::int64_t model_gradient_sampling_interval = 1;
  double freq_taper_frac = 0;  // cosine taper of this fraction of the spectrum when resampling
  double time_pad_frac = 0;    // zero padding of this fraction of nt before resampling
  bool time_taper = false;     // Hann taper in time before resampling
  StorageMode storage = StorageMode::device;
  bool storage_compression = false;
  // For StorageMode::disk; empty (the default): $TMPDIR, else /tmp. Never the current directory.
  std::string storage_directory;
  int nparallel = 0;    // OpenMP threads for the cpu backend; 0: all
  ScalarCpuTuning cpu;  // the cpu backend's block sizes (its speed only)
  // cpu backend: choose the forward's steps per sweep and tiles (3-D) or rows per block (2-D) by
  // timing candidates over a few steps of this problem, overriding those of `cpu`; the choice is
  // cached per machine, shape, accuracy, dtype and thread count (sciproxy/core/autotune.hpp) and
  // later calls read it. It changes the speed, never a bit of the results.
  bool autotune = false;
  // MPI (sciproxy/core/communicator.hpp): the ranks the call runs on, collectively. The shots
  // are split across them in contiguous blocks and each rank propagates its own. `shots`: every
  // rank passes every shot (the same arrays), or its own block (then the model is shared,
  // nmodels 1). `results`: receiver data, states and the source and initial-state gradients of
  // the shots on every rank, on rank 0 (the others receive none), or each rank its own shots'.
  // A model shared by the shots gets its gradient summed over the ranks (one allreduce per
  // call) on every rank; models per shot are rows like the rest.
  Communicator comm;
  RankItems shots = RankItems::all;
  ResultLayout results = ResultLayout::all_ranks;
};

template <class T>
struct ScalarInput {
  Grid grid;
  std::span<const T> v;  // [nmodels, *shape], nmodels 1 (shared) or nshots
  std::int64_t nmodels = 1;
  double dt = 0;        // seconds, of the source and receiver samples
  std::int64_t nt = 0;  // time samples of sources and receivers
  std::int64_t nshots = 1;
  std::int64_t nsources = 0;                         // per shot
  std::int64_t nreceivers = 0;                       // per shot
  std::span<const T> source_amplitudes;              // [nshots, nsources, nt]
  std::span<const std::int64_t> source_locations;    // [nshots, nsources, ndim]
  std::span<const std::int64_t> receiver_locations;  // [nshots, nreceivers, ndim]
};

// The propagator's state on the padded grid (model + PML + stencil halo), so that one call can
// continue another: u^t, u^{t-1}, and per dimension psi and zeta. Each is [nshots, *padded_shape].
template <class T>
struct ScalarState {
  std::array<std::int64_t, kMaxDims> padded_shape = {1, 1, 1};
  std::vector<T> wavefield, previous_wavefield;
  std::array<std::vector<T>, kMaxDims> psi, zeta;  // first ndim used
  bool empty() const { return wavefield.empty(); }
};

template <class T>
struct ScalarOutput {
  ScalarState<T> state;                // after the last step
  std::vector<T> receiver_amplitudes;  // [nshots, nreceivers, nt]
  std::int64_t step_ratio = 1;         // inner steps per dt (resampling)
  double inner_dt = 0;
  WorkModel work;
  double storage_bytes = 0;  // what the gradient pass stored (0 for a forward run)
};

template <class T>
struct ScalarGradient {
  std::vector<T> v;                  // [nmodels, *shape]
  std::vector<T> source_amplitudes;  // [nshots, nsources, nt]
  ScalarState<T> initial_state;      // gradient with respect to the initial state
  ScalarOutput<T> forward;           // what the forward pass computed on the way
  WorkModel work;                    // of the whole call: the forward pass and its adjoint
};

// Stable inner time step and step ratio for dt (Deepwave's CFL rule: max_dt = 0.6 /
// sqrt(sum 1/dx_i^2) / max_vel, step_ratio = ceil(dt / max_dt)).
struct TimeStepping {
  double inner_dt;
  std::int64_t step_ratio;
};
TimeStepping cfl_time_stepping(const Grid& grid, double dt, double max_vel);

// Forward modelling. `initial` (optional, may be empty) is the state to start from.
template <class T>
ScalarOutput<T> scalar(const Device& device, const ScalarInput<T>& in, const ScalarOptions& opt,
                       const ScalarState<T>* initial = nullptr, Timers* timers = nullptr);

// The padded_shape of the states of scalar() and scalar_gradient() with these arguments (the
// model window + PML + accuracy/2 halo cells per side), without running anything. The arguments
// are checked as those calls check them.
template <class T>
std::array<std::int64_t, kMaxDims> scalar_state_shape(const ScalarInput<T>& in,
                                                      const ScalarOptions& opt,
                                                      const ScalarState<T>* initial = nullptr);

// Gradient of a loss with respect to v, the source amplitudes and the initial state, given the
// gradient of the loss with respect to the receiver amplitudes [nshots, nreceivers, nt] (and,
// optionally, with respect to the final state). Runs the forward pass, then its exact adjoint.
template <class T>
ScalarGradient<T> scalar_gradient(const Device& device, const ScalarInput<T>& in,
                                  const ScalarOptions& opt,
                                  std::span<const T> grad_receiver_amplitudes,
                                  const ScalarState<T>* initial = nullptr,
                                  const ScalarState<T>* grad_final = nullptr,
                                  Timers* timers = nullptr);

// ---------------------------------------------------------------------------------------------
// Born (linearised) modelling, Deepwave's scalar_born. The scattered field u_sc is the exact
// derivative of the forward wavefield in the direction `scatter` of v (the PML profiles, max_vel
// and the step ratio held at their values for v):
//   u_sc^{t+1} = v^2 dt^2 L u_sc^t + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 L u^t
//                - 2 v scatter dt^2 f^t (at the source cells),
// so the Born receiver data is J scatter with J the Jacobian of scalar()'s receiver data with
// respect to v, and its adjoint (the migration image) is scalar_gradient's grad_v.

template <class T>
struct ScalarBornInput {
  // v, the grid, the sources, and in receiver_locations the receivers of the scattered field.
  ScalarInput<T> background;
  std::span<const T> scatter;      // [nmodels, *shape] m/s, as v; may be empty (zero) for gradients
  std::int64_t nbg_receivers = 0;  // per shot
  std::span<const std::int64_t> bg_receiver_locations;  // [nshots, nbg_receivers, ndim]
};

template <class T>
struct ScalarBornOutput {
  ScalarState<T> state;                   // background field after the last step
  ScalarState<T> scattered_state;         // scattered field after the last step
  std::vector<T> bg_receiver_amplitudes;  // [nshots, nbg_receivers, nt]
  std::vector<T> receiver_amplitudes;     // scattered: [nshots, nreceivers, nt]
  std::int64_t step_ratio = 1;
  double inner_dt = 0;
  WorkModel work;
};

template <class T>
struct ScalarBornGradient {
  // J^T grad_receiver_amplitudes: the gradient with respect to scatter (the migration image),
  // [nmodels, *shape]. Exact with the default options (model_gradient_sampling_interval 1, no
  // storage compression).
  std::vector<T> scatter;
  // Gradient of <grad_receiver_amplitudes, Born data> + <grad_bg_receiver_amplitudes, background
  // data> with respect to the source amplitudes, [nshots, nsources, nt]; empty unless asked for.
  std::vector<T> source_amplitudes;
  ScalarOutput<T> forward;  // the background forward pass (receivers: those of the scattered field)
  WorkModel work;           // of the whole call: the forward pass, its adjoint and the coupled one
};

// Born forward modelling. `initial` / `initial_scattered` (optional) are the states to start from.
template <class T>
ScalarBornOutput<T> scalar_born(const Device& device, const ScalarBornInput<T>& in,
                                const ScalarOptions& opt, const ScalarState<T>* initial = nullptr,
                                const ScalarState<T>* initial_scattered = nullptr,
                                Timers* timers = nullptr);

// Adjoint of scalar_born: the migration image (scalar_gradient's machinery) and, with
// `source_gradient`, the gradient with respect to the source amplitudes (one more adjoint pass of
// the coupled background and scattered fields). grad_bg_receiver_amplitudes may be empty (zero).
template <class T>
ScalarBornGradient<T> scalar_born_gradient(const Device& device, const ScalarBornInput<T>& in,
                                           const ScalarOptions& opt,
                                           std::span<const T> grad_receiver_amplitudes,
                                           std::span<const T> grad_bg_receiver_amplitudes = {},
                                           bool source_gradient = true,
                                           const ScalarState<T>* initial = nullptr,
                                           Timers* timers = nullptr);

}  // namespace sciproxy::wave
