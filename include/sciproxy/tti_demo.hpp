// tti: the one-field TTI operator of Devito's 2022 workshop demo (`TTISelfAdjointForward`,
// `python run.py -d 412 423 476 -nt 200`), a simplification of the self-adjoint pseudo-acoustic
// TTI system of Bube, Washbourne, Ergas and Nemeth (2016). See docs/kernels/tti.md, "The
// workshop operator".
//
// One field u on an NX x NY x NZ grid (x, y, z; z vertical and contiguous in memory, Devito's
// layout). Per step, with D+ / D- the staggered first derivatives of space order A (4, 8, 12, 16;
// src/tti/math.hpp) and g = (D+x u, D+y u, D+z u):
//   flux pass:       F = b(1+2eps) [e1 (e1.g) + e2 (e2.g)]
//                        + n [b(1 - f eta^2) (n.g) + b f eta sqrt(1-eta^2)]
//                    e1 = (cos th sin ph, cos th cos ph, -sin th), e2 = (cos ph, -sin ph, 0),
//                    n  = (sin th sin ph, sin th cos ph, cos th)
//   divergence pass: u+ = (2 - d) u + (d - 1) u- + dt^2 (vp^2 / b) (D-x Fx + D-y Fy + D-z Fz)
//   injection:       u+ += dt^2 (vp^2 / b) s(t) at the 8 corners around the source
//                    (trilinear weights)
// The fields are zero outside the grid (a halo of A/2 cells) and the fluxes are kept on the grid
// only (zero outside), Devito's convention: no boundary condition, the spatial operator is
// symmetric (e1, e2, n are orthonormal, so its linear part is D- . C D+ with C symmetric), and
// with eps = eta = 0 it is the variable-density Laplacian D- . (b D+ u). The workshop wrote the
// update without dt^2 (folded into its dummy constants); here dt is explicit so that the
// stability limit can be checked.
//
// Arrays are row-major [NX, NY, NZ] (z fastest). A material may be given as one value (constant)
// or as one value per grid point.
//
// Long calls stop between steps when asked (sciproxy/core/cancel.hpp): they throw Cancelled and
// their outputs are unspecified.
//
// Under MPI (TtiDemoOptions::comm of several ranks; docs/kernels/tti.md, "The workshop operator
// under MPI"): every rank passes the same whole input; the grid is split into a Cartesian grid of
// blocks, one per rank (process_grid). Each rank holds its block widened by a ghost ring of the
// points one sweep of the stencil reaches (2M - 1 per step, M = space_order / 2), refreshed from
// its neighbours after each sweep while it computes the block's interior. The source's eight
// corners are injected by every rank whose window holds them, so a source on a boundary between
// ranks is spread as on one process. Each point of a block is computed with one process's
// arithmetic: the results are one process's, bit for bit, on the cpu backend (the others refuse
// several ranks).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/seismic.hpp"

namespace sciproxy::tti {

// two_pass: the demo's form (a flux pass writes three flux arrays, a divergence pass reads them).
// fused: one pass per step that keeps the fluxes of a block on chip (cache on cpu, registers and
// shared memory on cuda). Same arithmetic per point; the reference always runs two passes.
enum class TtiDemoForm { two_pass, fused };
const char* tti_demo_form_name(TtiDemoForm form);          // "two-pass", "fused"
TtiDemoForm parse_tti_demo_form(const std::string& name);  // throws InvalidArgument

template <class T>
struct TtiDemoMaterial {
  // Each of size 1 (constant) or NX * NY * NZ.
  std::span<const T> vp;       // m/s, > 0
  std::span<const T> b;        // buoyancy 1 / rho, > 0
  std::span<const T> epsilon;  // Thomsen epsilon, 1 + 2 eps > 0
  std::span<const T> eta;      // eta-hat in [0, 1] with f eta^2 <= 1
  std::span<const T> f;        // 1 - vs^2 / vp^2, in [0, 1]
  std::span<const T> theta;    // tilt, radians
  std::span<const T> phi;      // azimuth, radians
  std::span<const T> damping;  // d in [0, 1]
};

template <class T>
struct TtiDemoInput {
  std::array<std::int64_t, 3> shape = {0, 0, 0};  // NX, NY, NZ grid points
  std::array<double, 3> spacing = {10, 10, 10};   // metres
  double dt = 0;                                  // seconds
  std::int64_t nt = 0;                            // time steps
  TtiDemoMaterial<T> material;
  // The source: position in metres (grid point (i, j, k) lies at (i, j, k) * spacing), anywhere
  // in the grid's box; amplitudes, one per step (s(t) injected after step t).
  std::array<double, 3> source_position = {0, 0, 0};
  std::span<const T> source_amplitudes;  // [nt]
  // Optional initial state u^0, u^{-1} ([NX, NY, NZ] each; empty: zero).
  std::span<const T> initial_u, initial_u_prev;
};

// The fused cpu kernel's steps per sweep when TtiDemoCpuTuning::sweep_steps is 0 and no
// autotuner chooses.
inline constexpr int kStaticSweepSteps = 1;

// Block sizes of the cpu backend, gathered here so that a tuner can search them. None changes
// the results (each point's arithmetic is fixed); the defaults are the measured good choice on
// the development machine (bench/tti_cpu_notes.md).
struct TtiDemoCpuTuning {
  // fused: y rows of one thread's tile (full z rows, streamed along x). 0: n_y / threads, split
  // further only while a tile's working set exceeds tile_kib.
  std::int64_t tile_rows = 0;
  std::int64_t tile_kib = 4096;  // fused, tile_rows 0: working-set budget per thread (KiB)
  std::int64_t block_rows = 16;  // two-pass: y rows swept together through all x planes
  // fused: time steps per sweep through memory, 1 or 2 (the second stage follows the first
  // along x, so that u and the coefficients are read once for two steps, at the cost of
  // recomputing 2M - 1 rows on each side of a tile). 0: kStaticSweepSteps, or the autotuner's
  // choice. Two pay where memory bandwidth per core is scarce; on the 2-core machine of
  // bench/tti_cpu_notes.md one step was 18-24% faster with varying materials at 200^3 and 256^3.
  int sweep_steps = 0;
};

struct TtiDemoOptions {
  int space_order = 8;                    // 4, 8, 12 or 16
  TtiDemoForm form = TtiDemoForm::fused;  // cpu and cuda; the reference runs two passes
  int nparallel = 0;                      // OpenMP threads of the cpu backend; 0: all
  TtiDemoCpuTuning cpu;                   // cpu backend only
  // cpu backend, fused form: choose tile_kib and sweep_steps by timing candidates on a few steps
  // of this problem, once per machine, shape, space order, materials (constant or varying),
  // dtype and thread count (sciproxy/core/autotune.hpp); later calls read the cached choice.
  // Overrides cpu.tile_kib and cpu.sweep_steps; changes no result.
  bool autotune = false;
  // MPI: the ranks the call runs on (this process alone by default). Every rank passes the same
  // input and options but nparallel; bad input or ranks that disagree fail on every rank.
  Communicator comm;
  // Ranks per axis (x, y, z); 0 entries are chosen, as MPI_Dims_create, to exchange the fewest
  // points, z left whole where the given entries allow (long rows, and the exchange overlapped).
  // Every block must hold the ghost ring's width along a split axis: 2M - 1 points times the
  // steps per sweep, otherwise an InvalidArgument naming process_grid. (The autotuner's two
  // steps per sweep are allowed under MPI where their ring of 2 (2M - 1) adds at most 30% to a
  // block; else one step is taken. cpu.sweep_steps fixes it.)
  std::array<int, 3> process_grid = {0, 0, 0};
  // Where u and u_prev go: the whole grid on every rank, on rank 0 only (the others get empty
  // arrays), or each rank its own block (TtiDemoOutput::block_origin, block_shape).
  ResultLayout results = ResultLayout::all_ranks;
};

// Work of one section over the whole run: flops are those its expressions do per point (see
// tti_demo_flops), bytes the traffic of the arrays the backend's loops read and write, each
// once per step (tti_demo_bytes).
struct TtiDemoSection {
  std::string name;  // "flux pass", "divergence pass", "fused flux + divergence", "source
                     // injection", and under MPI "halo exchange" (no work)
  WorkModel work;
  double seconds = 0;  // filled when the backend timed the section (0 otherwise)
};

template <class T>
struct TtiDemoOutput {
  std::vector<T> u, u_prev;  // u^nt and u^{nt-1}, [NX, NY, NZ] (see block_shape)
  // The part of the grid u and u_prev hold: the whole grid ({0, 0, 0}, {NX, NY, NZ}) unless
  // options.results is ResultLayout::own on several ranks (then this rank's block, whose point
  // (0, 0, 0) is the grid's point block_origin), or empty on ranks other than 0 with
  // ResultLayout::root.
  std::array<std::int64_t, 3> block_origin = {0, 0, 0};
  std::array<std::int64_t, 3> block_shape = {0, 0, 0};
  std::array<int, 3> process_grid = {1, 1, 1};  // the ranks per axis the call ran on
  WorkModel work;                               // the whole operator: points = NX NY NZ nt
  std::vector<TtiDemoSection> sections;
  double dt_limit = 0;  // the stability limit dt was checked against
};

// Flops per grid point per step of the implemented expressions of the cpu and cuda backends,
// for space order A = 2M (each add, sub, mul = 1, Devito's convention; src/tti/math.hpp):
// flux 9M + 16 (three staggered derivatives of 3M each, the flux combination 16), divergence
// 9M + 9 (three derivatives, their sum, the update). Order 8: 52 + 45 = 97.
struct TtiDemoFlops {
  double flux = 0, divergence = 0;
  double total() const { return flux + divergence; }
};
TtiDemoFlops tti_demo_flops(int space_order);

// The largest stable dt for these materials and spacing (a sufficient condition: the spectral
// radius of the update's spatial operator bounded by max(vp^2/b) max(b max(1+2eps, 1-f eta^2))
// 4 (sum_k |c_k|)^2 sum_d 1/h_d^2, and leapfrog with damping d stable for radius <= 4 - 2 max d).
template <class T>
double tti_demo_dt_limit(const TtiDemoInput<T>& in, int space_order);

// Checks every argument (throws InvalidArgument naming it) and runs nt steps on `device`.
template <class T>
TtiDemoOutput<T> tti_demo(const Device& device, const TtiDemoInput<T>& in,
                          const TtiDemoOptions& options, Timers* timers = nullptr);

// The part of the grid a call's u and u_prev hold on this rank, as TtiDemoOutput::block_origin,
// block_shape and process_grid give it after the call: the whole grid on one process or with
// ResultLayout::all_ranks, on rank 0 alone with root (empty elsewhere), this rank's block with own.
struct TtiDemoBlock {
  std::array<std::int64_t, 3> origin = {0, 0, 0};
  std::array<std::int64_t, 3> shape = {0, 0, 0};
  std::array<int, 3> process_grid = {1, 1, 1};
};

// That part for a call on a grid of `shape` points with `options` (space_order, form,
// cpu.sweep_steps, autotune, comm, process_grid, results), without running it. Not collective
// (no rank waits for another), and it checks no agreement between the ranks; a shape or process
// grid the call would refuse throws the same InvalidArgument.
TtiDemoBlock tti_demo_block(const std::array<std::int64_t, 3>& shape,
                            const TtiDemoOptions& options);
// The same for an input (its shape).
template <class T>
TtiDemoBlock tti_demo_block(const TtiDemoInput<T>& in, const TtiDemoOptions& options);

// Ricker wavelet of peak frequency f0 delayed by t0 (Devito's RickerSource: t0 = 1 / f0 when
// t0 <= 0): (1 - 2 a^2) exp(-a^2), a = pi f0 (t - t0), at t = 0, dt, ..., (nt - 1) dt. Shared
// with the wave family: declared in sciproxy/seismic.hpp.
using seismic::ricker_wavelet;

}  // namespace sciproxy::tti
