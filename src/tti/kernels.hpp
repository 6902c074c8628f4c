// The backend kernels of the tti family, declared once for the reference, cpu and cuda backends
// (core/dispatch.hpp): `forward`, the coupled P/M self-adjoint TTI system
// (include/sciproxy/tti.hpp, api.cpp), and `demo_forward`, the one-field operator of Devito's
// workshop demo (include/sciproxy/tti_demo.hpp, demo_api.cpp). Equations and sources:
// docs/kernels/tti.md. The api files check the arguments, pad the grids, precompute the per-cell
// coefficients once and hand every backend the same problem; cuda_stubs.cpp (core) supplies the
// cuda kernels in builds without CUDA.
//
// Coupled system (Bube, Washbourne, Ergas and Nemeth 2016; WaveFD.jl prop3DAcoTTIDenQ_DEO2_FDTD).
// Padded grid, per axis a (size n[a]): [halo | sponge low | model | sponge high | halo], halo
// H = order/2 cells where the fields are zero. Flat index (i0 * n[1] + i1) * n[2] + i2.
// Per step t, for P and M (gP = D+ P, the three staggered derivatives, math.hpp):
//   flux boxes J (every axis [H-1, n-H)) : FP = e gP + n (a (n.gP) + c (n.gM))
//                                          FM = g gM + n (c (n.gP) + mm (n.gM))
//   fluxes are zero outside J, so the divergence D- . F at the cells U (every axis [H, n-H)) is
//   exactly -(D+)^T . F and the operator is symmetric;
//   receivers^t = P^t (+ M^t when record_m) at the receiver cells, before the step;
//   P^{t+1} = (2 - d) P^t + (d - 1) P^{t-1} + scale (D- . FP),  the same for M;
//   P^{t+1}[source] += source_scale * s^t  (and M^{t+1} when inject_m).
// Free surface (free_surface): the surface is row H of axis 0 (P = M = 0 there, never updated);
// before the flux pass the rows H-1 .. 0 of P and M hold the odd mirror (P[H-r] = -P[H+r]),
// before the divergence pass the rows H-1 .. 0 of the axis-0 fluxes hold the even mirror about
// H - 1/2 (F[H-1-r] = F[H+r]); J starts at row H and U at row H+1 along axis 0. This is
// D-_fs = -(D+_fs)^T again. The backends leave the mirror rows at zero on return. The adjoint is
// this same forward kernel run from the receivers (api.cpp).
//
// Workshop operator. Padded grid: the NX x NY x NZ grid with a halo of M = A/2 points on every
// side, where u and the fluxes stay zero (so the stencils need no bounds checks). Flat index of
// grid point (i, j, k) = ((i + M) * np[1] + (j + M)) * np[2] + (k + M), np = n + 2M, except along
// z where np[2] = nz_vector + 2M: the rows carry nz_vector - nz more zero points (nz rounded up to
// kVectorLength), so that SIMD loops may run over whole vectors without remainder loops. The
// coefficients are zero there too, so a backend that computes there gets fluxes 0 and u+ = 0.
// The reference evaluates the spec's expressions from the raw materials in double precision.
// cpu and cuda use coefficients computed once (demo_api.cpp), since e1 e1^T + e2 e2^T = I - n n^T:
//   F = a g + (bma (n.g) + s) n,   a = b(1+2eps), bma = b(1 - f eta^2) - a,
//                                  s = b f eta sqrt(1-eta^2)
//   u+ = (2 - d) u + (d - 1) u- + m (D- . F),   m = dt^2 vp^2 / b
#pragma once

#include <array>
#include <cstdint>

#include "core/dispatch.hpp"
#include "sciproxy/tti_demo.hpp"

namespace sciproxy::tti::kernels {

// The space orders every kernel is compiled for (the stencils are unrolled per order).
using SpaceOrders = ValueList<4, 8, 12, 16>;

// ---------------------------------------------------------------------------------------------
// The coupled P/M system.

// Per-cell coefficient arrays of the padded grid (b = buoyancy, n = symmetry axis, each [points]).
template <class T>
struct TtiCoefficients {
  const T* e = nullptr;            // b (1 + 2 eps)
  const T* g = nullptr;            // b (1 - f)
  const T* a = nullptr;            // -b (2 eps + f eta^2)
  const T* c = nullptr;            // b f eta sqrt(1 - eta^2)
  const T* mm = nullptr;           // b f eta^2
  std::array<const T*, 3> n = {};  // n along axes 0, 1, 2
  const T* scale = nullptr;        // dt^2 vp^2 / b
  const T* damping = nullptr;      // d = dt w / Q
};

// Under MPI (api.cpp; docs/kernels/tti.md, "Under MPI"): the halo exchanges of one rank's
// subdomain. The kernel calls start_* and finish_* in pairs, on its master thread and outside
// its parallel regions, computing between them the cells that need none of the data in flight.
//   fields: the faces of P and M (the rank's own cells next to a neighbour) go out, the
//     neighbours' faces come into the halo: halo - 1 layers on a low side, halo on a high side
//     (what D+ reads: offsets -(halo-1) .. +halo).
//   fluxes: across the faces normal to axis a only the axis-a fluxes FP_a and FM_a (what D-
//     along a reads; the other components are read along their own axes): halo layers on a low
//     side, halo - 1 on a high side (D- reads offsets -halo .. halo-1).
template <class T>
class TtiHaloExchange {
 public:
  virtual ~TtiHaloExchange() = default;
  // start_fields carries this rank's cancellation poll (`stop`), voted with the exchange
  // (collective.hpp, start_exchange); finish_fields returns whether any rank asked to stop, so
  // that all stop at the same step.
  virtual void start_fields(T* p, T* m, bool stop) = 0;
  virtual bool finish_fields() = 0;
  virtual void start_fluxes(const std::array<T*, 3>& fp, const std::array<T*, 3>& fm) = 0;
  virtual void finish_fluxes() = 0;
  // Lets the messages in flight move (MPI moves large ones only inside its calls): called now
  // and then by thread 0 of the kernel's parallel region while it computes an interior (the
  // thread that calls start_* and finish_*). Never throws; a failure surfaces in finish_*.
  virtual void progress() noexcept = 0;
};

// One rank's part of the padded grid: the fields are its local arrays of shape TtiProblem::n,
// [halo | own cells | halo] per axis, a window of the whole padded grid. The boxes are the
// whole grid's J and U (above) cut to the rank's own cells, in local indices; the flux box also
// holds the row halo - 1 of a side on the whole grid's boundary (J does). Fluxes and updates
// are computed cell by cell as on one process, with the same code: the result is bit for bit
// one process's.
template <class T>
struct TtiSubdomain {
  std::array<std::int64_t, 3> flux_lo{}, flux_hi{}, update_lo{}, update_hi{};
  std::array<std::array<bool, 2>, 3> neighbour{};  // [axis][low, high]: another rank there
  bool surface = false;  // the free surface is local row halo (this rank mirrors about it)
  TtiHaloExchange<T>* exchange = nullptr;
};

template <class T>
struct TtiProblem {
  int order = 8;  // 4, 8, 12, 16
  std::int64_t nshots = 1;
  std::array<std::int64_t, 3> n = {1, 1, 1};  // padded shape
  std::int64_t points() const { return n[0] * n[1] * n[2]; }
  std::int64_t halo() const { return order / 2; }
  std::array<T, 3> rh = {0, 0, 0};  // 1 / spacing
  bool free_surface = false;
  TtiCoefficients<T> coef;
  std::int64_t nsources = 0, nreceivers = 0;  // per shot
  // Flat padded indices; -1: a cell of another rank (its traces are left at 0 here).
  const std::int64_t* source_cells = nullptr;    // [nshots, nsources]
  const T* source_scale = nullptr;               // [nshots, nsources]
  const std::int64_t* receiver_cells = nullptr;  // [nshots, nreceivers]
  bool inject_m = true;   // sources go into P and M (forward) or P only (adjoint)
  bool record_m = false;  // receivers record P (forward) or P + M (adjoint)
  std::int64_t nt = 0;
  // Under MPI: this rank's subdomain (n is then its local shape); null: the whole grid. The cpu
  // backend only (api.cpp refuses the others).
  const TtiSubdomain<T>* subdomain = nullptr;
};

// P^t, P^{t-1}, M^t, M^{t-1} of every shot, each [nshots, points] (in: t = 0, out: t = nt).
template <class T>
struct TtiFields {
  T* p = nullptr;
  T* p_prev = nullptr;
  T* m = nullptr;
  T* m_prev = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The workshop operator.

struct DemoGrid {
  int order = 8;                               // space order A
  int halo = 4;                                // M = A / 2
  std::array<std::int64_t, 3> n = {0, 0, 0};   // grid points
  std::array<std::int64_t, 3> np = {0, 0, 0};  // padded: n + 2 M
  std::array<double, 3> spacing = {1, 1, 1};
  static constexpr std::int64_t kVectorLength = 16;
  std::int64_t nz_vector = 0;  // n[2] rounded up to kVectorLength
  std::int64_t stride_x() const { return np[1] * np[2]; }
  std::int64_t stride_y() const { return np[2]; }
  std::int64_t padded_points() const { return np[0] * np[1] * np[2]; }
  std::int64_t interior_points() const { return n[0] * n[1] * n[2]; }
  std::int64_t index(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return ((i + halo) * np[1] + (j + halo)) * np[2] + (k + halo);
  }
};

// A raw material on the grid (not padded): value of point p = data[constant ? 0 : p], p the flat
// index (i * n[1] + j) * n[2] + k.
template <class T>
struct DemoField {
  const T* data = nullptr;
  bool constant = true;
  T at(std::int64_t p) const { return data[constant ? 0 : p]; }
};

template <class T>
struct DemoRawMaterial {
  DemoField<T> vp, b, epsilon, eta, f, theta, phi, damping;
};

// Per-point coefficients on the padded grid (zero in the halo).
template <class T>
struct DemoCoefficients {
  const T *nx = nullptr, *ny = nullptr, *nz = nullptr;  // the symmetry axis n
  const T *a = nullptr, *bma = nullptr, *s = nullptr;   // see the header comment
  const T* m = nullptr;                                 // dt^2 vp^2 / b
  const T* d = nullptr;                                 // damping
};

// The source: the 8 padded cells around its position and their trilinear weights (sum 1).
// The host backends scale by dt^2 vp^2 / b at each corner themselves (reference: from the raw
// materials in double; cpu: m), cuda gets `scaled` = weight * m from demo_api.cpp. Under MPI a
// rank's grid is its window, and only the first `corners` corners, those in the window, are
// injected (the cpu backend).
template <class T>
struct DemoSource {
  int corners = 8;
  std::array<std::int64_t, 8> cells{};
  std::array<std::array<std::int64_t, 3>, 8> points{};  // grid coordinates of each corner
  std::array<double, 8> weights{};
  std::array<T, 8> scaled{};      // weights[c] * m[cells[c]] in T
  const T* amplitudes = nullptr;  // [nt]
};

// Under MPI (demo_api.cpp): after every sweep but the last the cpu backend starts the refresh of
// its window's ghost ring from the neighbouring ranks, polls it (progress, from one thread)
// while it computes what needs no ring, and finishes it before the rest. Point (i, j, k) of the
// window is at origin[i * stride_x + j * stride_y + k] in the backend's own layout. Cancellation
// is voted with the exchange (collective.hpp, start_exchange's stop): start takes this rank's
// poll, finish returns whether any rank asked to stop, so that all stop at the same step.
template <class T>
struct DemoFieldView {
  T* origin = nullptr;
  std::int64_t stride_x = 0, stride_y = 0;
};
template <class T>
class DemoExchange {
 public:
  virtual ~DemoExchange() = default;
  virtual void start(DemoFieldView<T> u, DemoFieldView<T> u_prev, bool stop) = 0;
  virtual void progress() noexcept = 0;
  virtual bool finish() = 0;  // true: a rank asked to stop
};

struct DemoBox {
  std::int64_t x0 = 0, x1 = 0, y0 = 0, y1 = 0;
};

// Everything a backend needs besides the fields: the reference reads `raw` and `dt`, cpu and
// cuda read `coef` (set for them only) and `form` (the reference always runs two passes), cpu
// also `constant`, `derived_nz` and `tuning`.
template <class T>
struct DemoProblem {
  DemoGrid grid;
  DemoRawMaterial<T> raw;
  double dt = 0;
  DemoCoefficients<T> coef;
  bool constant = false;    // every coefficient holds one value over the grid (the demo's case)
  bool derived_nz = false;  // cpu fused: |nz| >= 1/8 over the grid, the kernel derives nz
  DemoSource<T> source;
  std::int64_t nt = 0;
  TtiDemoForm form = TtiDemoForm::two_pass;
  TtiDemoCpuTuning tuning;
  DemoExchange<T>* exchange = nullptr;  // cpu, under MPI
  // cpu, under MPI with one step per sweep: the planes [x0, x1) and rows [y0, y1) of the rank's
  // block in its window, where alone u+ is wanted (z rows are computed whole); the flux is
  // computed there widened by M. The other points of the window are left as they were: the
  // exchange refreshes u's ring after the step. Empty (x1 = 0): the whole grid.
  DemoBox update_box;
  // With update_box: the part of it that reads no ring (computed while the ring travels), or
  // empty when every point does (z split).
  DemoBox interior_box;
};

// u: in u^0, out u^nt; u_prev: in u^{-1}, out u^{nt-1}; both padded.
template <class T>
struct DemoFields {
  T* u = nullptr;
  T* u_prev = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The kernels. Host arrays in and out on every backend (cuda uploads and downloads them).

// sources: [nt, nshots, nsources]; receivers: [nt, nshots, nreceivers] written. cuda records the
// regions "upload", "steps", "download" (CUDA events).
#define SCIPROXY_TTI_FORWARD(T)                                                             \
  void forward(const ::sciproxy::Context& ctx, const TtiProblem<T>& p, TtiFields<T> fields, \
               const T* sources, T* receivers)
// Regions: "flux pass", "divergence pass" (or "fused flux + divergence"), "source injection";
// cpu adds "cpu layout", cuda "upload" and "download" (CUDA events).
#define SCIPROXY_TTI_DEMO_FORWARD(T) \
  void demo_forward(const ::sciproxy::Context& ctx, const DemoProblem<T>& p, DemoFields<T> fields)

#define SCIPROXY_TTI_KERNELS \
  template <class T>         \
  SCIPROXY_TTI_FORWARD(T);   \
  template <class T>         \
  SCIPROXY_TTI_DEMO_FORWARD(T);

SCIPROXY_DECLARE_KERNELS(SCIPROXY_TTI_KERNELS)

}  // namespace sciproxy::tti::kernels
