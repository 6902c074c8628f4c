// Scalar propagator, reference backend: the definition of correct. Plain loops, one shot at a
// time, arithmetic in double, every non-halo cell through the full C-PML formula (a = b = b' = 0
// turn it into the plain Laplacian), no interior shortcut. The scheme is in kernels.hpp:
//   tmp_x = (1 + b_x) D2_x u + b'_x D1_x u + D1_x(a_x psi_x)
//   W     = sum_x (1 + b_x) tmp_x + a_x zeta_x
//   psi_x' = b_x D1_x u + a_x psi_x,   zeta_x' = b_x tmp_x + a_x zeta_x
//   u'    = v^2 dt^2 W + 2 u - u_prev,   u'[source] += scaled source,   receiver = u (before)
// The backward pass is its exact transpose, derived here by hand (independently of
// math.hpp): with lambda the adjoint of u', g = v^2 dt^2 lambda and, per dimension,
// tbar = (1 + b) g + b zetabar' (the adjoint of tmp) and d1bar = b' tbar + b psibar' (of D1 u):
//   ubar      = 2 lambda + ubar_prev' + sum_x [ D2((1 + b) tbar) - D1(d1bar) ]
//               (D2 symmetric, D1 antisymmetric)
//   psibar    = a (psibar' - D1 tbar),   zetabar = a (g + zetabar'),   ubar_prev = -lambda
//   grad source = lambda[source],  ubar[receiver] += grad receiver,  grad v += lambda 2 v dt^2 W
// Born modelling runs the same step on the background and the scattered field, the scattered
// one with the coupling 2 v scatter dt^2 W(u) added; its adjoint feeds g + 2 v scatter dt^2
// lambda_sc to the background's transpose (kernels.hpp).
// Second derivatives are summed as neighbour-minus-centre differences (exact zero for constants).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "kernels.hpp"
#include "sciproxy/core/cancel.hpp"

namespace sciproxy::wave::kernels::reference {

namespace {

// Fornberg (1988) central stencils, k = 0 .. accuracy/2: first derivative (k >= 1) and second
// derivative (k >= 1; the centre is -2 sum_k c2_k).
struct Stencil {
  int radius = 0;
  std::array<double, 5> c1{}, c2{};
};

Stencil stencil(int accuracy) {
  Stencil s;
  s.radius = accuracy / 2;
  switch (accuracy) {
    case 2:
      s.c1 = {0, 1.0 / 2};
      s.c2 = {0, 1};
      break;
    case 4:
      s.c1 = {0, 2.0 / 3, -1.0 / 12};
      s.c2 = {0, 4.0 / 3, -1.0 / 12};
      break;
    case 6:
      s.c1 = {0, 3.0 / 4, -3.0 / 20, 1.0 / 60};
      s.c2 = {0, 3.0 / 2, -3.0 / 20, 1.0 / 90};
      break;
    default:
      s.c1 = {0, 4.0 / 5, -1.0 / 5, 4.0 / 105, -1.0 / 280};
      s.c2 = {0, 8.0 / 5, -1.0 / 5, 8.0 / 315, -1.0 / 560};
      break;
  }
  return s;
}

// The padded grid of one shot and its non-halo cells.
template <class T>
struct Grid {
  explicit Grid(const ScalarProblem<T>& p) : st(stencil(p.accuracy)), ndim(p.ndim), n(p.n) {
    stride = {n[1] * n[2], n[2], 1};
    for (int d = 0; d < kMaxDims; ++d) {
      lo[d] = d < ndim ? st.radius : 0;
      hi[d] = d < ndim ? n[d] - st.radius : 1;
    }
    points = n[0] * n[1] * n[2];
  }
  // Calls f(flat index, coordinates) for every cell outside the halo.
  template <class F>
  void for_each_cell(F&& f) const {
    for (std::int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
      for (std::int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
        for (std::int64_t i2 = lo[2]; i2 < hi[2]; ++i2)
          f((i0 * n[1] + i1) * n[2] + i2, std::array<std::int64_t, kMaxDims>{i0, i1, i2});
  }

  Stencil st;
  int ndim;
  std::array<std::int64_t, kMaxDims> n, stride{}, lo{}, hi{};
  std::int64_t points;
};

template <class T>
std::vector<T> shot_copy(const T* field, std::int64_t shot, std::int64_t points) {
  if (!field) return std::vector<T>(static_cast<std::size_t>(points), T(0));
  return std::vector<T>(field + shot * points, field + (shot + 1) * points);
}

template <class T>
void shot_store(const std::vector<T>& v, T* field, std::int64_t shot) {
  if (field) std::copy(v.begin(), v.end(), field + shot * static_cast<std::int64_t>(v.size()));
}

// One shot's fields on the padded grid. Forward: u = u^t, u_prev = u^{t-1}, psi/zeta of step t
// and the buffers of step t+1. Adjoint: u = lambda (adjoint of u^{t+1}), u_prev = the adjoint of
// u^t through the u_prev slot, psi/zeta their adjoints.
template <class T>
struct ShotState {
  std::vector<T> u, u_prev;
  std::array<std::vector<T>, kMaxDims> psi, zeta, psi_next, zeta_next;

  ShotState(const ScalarFields<T>& f, int ndim, std::int64_t shot, std::int64_t np)
      : u(shot_copy(f.u, shot, np)), u_prev(shot_copy(f.u_prev, shot, np)) {
    for (int d = 0; d < ndim; ++d) {
      psi[d] = shot_copy(f.psi[d], shot, np);
      zeta[d] = shot_copy(f.zeta[d], shot, np);
      psi_next[d] = psi[d];
      zeta_next[d] = zeta[d];
    }
  }
  void store(const ScalarFields<T>& f, int ndim, std::int64_t shot) const {
    shot_store(u, f.u, shot);
    shot_store(u_prev, f.u_prev, shot);
    for (int d = 0; d < ndim; ++d) {
      shot_store(psi[d], f.psi[d], shot);
      shot_store(zeta[d], f.zeta[d], shot);
    }
  }
  void swap_aux(int ndim) {
    for (int d = 0; d < ndim; ++d) {
      std::swap(psi[d], psi_next[d]);
      std::swap(zeta[d], zeta_next[d]);
    }
  }
};

// u_prev <- u^{t+1} without the sources (in place), psi_next/zeta_next <- step t+1. w_out (may be
// null) receives W per cell; with `scatter`, the Born coupling 2 v scatter dt^2 w_bg is added.
template <class T>
void forward_step(const ScalarProblem<T>& p, const Grid<T>& g, const T* v, ShotState<T>& st,
                  T* store, std::vector<double>* w_out, const T* scatter,
                  const std::vector<double>* w_bg) {
  const double dt2 = p.dt2;
  g.for_each_cell([&](std::int64_t i, const std::array<std::int64_t, kMaxDims>& c) {
    double w = 0;
    for (int d = 0; d < p.ndim; ++d) {
      const T* a = p.a[d];
      const T* b = p.b[d];
      const T* ps = st.psi[d].data();
      const T* uu = st.u.data();
      const std::int64_t x = c[d], s = g.stride[d];
      const double uc = uu[i];
      double du = 0, ddu = 0, dapsi = 0;  // D1 u, D2 u, D1(a psi) without 1/dx, 1/dx^2
      for (int k = 1; k <= g.st.radius; ++k) {
        const double up = uu[i + k * s], down = uu[i - k * s];
        du += g.st.c1[k] * (up - down);
        ddu += g.st.c2[k] * ((up - uc) + (down - uc));
        dapsi += g.st.c1[k] * (static_cast<double>(a[x + k]) * ps[i + k * s] -
                               static_cast<double>(a[x - k]) * ps[i - k * s]);
      }
      du *= p.rdx[d];
      ddu *= p.rdx2[d];
      dapsi *= p.rdx[d];
      const double ax = a[x], bx = b[x];
      const double tmp = (1 + bx) * ddu + static_cast<double>(p.dbdx[d][x]) * du + dapsi;
      w += (1 + bx) * tmp + ax * st.zeta[d][i];
      st.psi_next[d][i] = static_cast<T>(bx * du + ax * ps[i]);
      st.zeta_next[d][i] = static_cast<T>(bx * tmp + ax * st.zeta[d][i]);
    }
    const double vi = v[i];
    if (store) store[i] = static_cast<T>(2 * vi * dt2 * w);
    if (w_out) (*w_out)[i] = w;
    double coupling = 0;
    if (scatter) coupling = 2 * vi * static_cast<double>(scatter[i]) * dt2 * (*w_bg)[i];
    // u_prev[i] is read only here: the new field overwrites it in place.
    st.u_prev[i] = static_cast<T>(vi * vi * dt2 * w + 2 * static_cast<double>(st.u[i]) -
                                  st.u_prev[i] + coupling);
  });
}

// One adjoint step of the fields in st (u = lambda) with gl = the g of kernels.hpp per cell
// (zero in the halo): afterwards st.u is the adjoint of u^t and st.u_prev that of u^{t-1}
// (-lambda).
template <class T>
void backward_step(const ScalarProblem<T>& p, const Grid<T>& g, ShotState<T>& st,
                   const std::vector<double>& gl) {
  g.for_each_cell([&](std::int64_t i, const std::array<std::int64_t, kMaxDims>& c) {
    double acc = 2 * static_cast<double>(st.u[i]) + st.u_prev[i];
    for (int d = 0; d < p.ndim; ++d) {
      const T* a = p.a[d];
      const T* b = p.b[d];
      const T* db = p.dbdx[d];
      const T* pb = st.psi[d].data();
      const T* zb = st.zeta[d].data();
      const std::int64_t x = c[d], s = g.stride[d];
      // tbar and d1bar at the cell j = i + k s (coordinate x + k)
      auto tbar = [&](std::int64_t k) {
        const std::int64_t j = i + k * s;
        return (1 + static_cast<double>(b[x + k])) * gl[j] + static_cast<double>(b[x + k]) * zb[j];
      };
      auto d1bar = [&](std::int64_t k) {
        return static_cast<double>(db[x + k]) * tbar(k) +
               static_cast<double>(b[x + k]) * pb[i + k * s];
      };
      const double centre = (1 + static_cast<double>(b[x])) * tbar(0);
      double second = 0, first = 0,
             dtbar = 0;  // D2((1+b) tbar), D1(d1bar), D1(tbar) without 1/dx^n
      for (int k = 1; k <= g.st.radius; ++k) {
        const double t_up = tbar(k), t_down = tbar(-k);
        second += g.st.c2[k] * (((1 + static_cast<double>(b[x + k])) * t_up - centre) +
                                ((1 + static_cast<double>(b[x - k])) * t_down - centre));
        first += g.st.c1[k] * (d1bar(k) - d1bar(-k));
        dtbar += g.st.c1[k] * (t_up - t_down);
      }
      acc += second * p.rdx2[d] - first * p.rdx[d];
      st.psi_next[d][i] = static_cast<T>(a[x] * (pb[i] - dtbar * p.rdx[d]));
      st.zeta_next[d][i] = static_cast<T>(a[x] * (gl[i] + static_cast<double>(zb[i])));
    }
    st.u_prev[i] = static_cast<T>(acc);  // read only here: overwritten in place by ubar^t
  });
  // Now u_prev holds ubar^t and lambda becomes the adjoint of u^{t-1} via the u_prev slot.
  for (std::size_t i = 0; i < st.u.size(); ++i) st.u[i] = -st.u[i];
  std::swap(st.u, st.u_prev);
  st.swap_aux(p.ndim);
}

template <class T>
void record(const T* field, std::int64_t count, const std::int64_t* cells, T* out) {
  for (std::int64_t r = 0; r < count; ++r) out[r] = field[cells[r]];
}

template <class T>
void inject(T* field, std::int64_t count, const std::int64_t* cells, const T* values) {
  for (std::int64_t r = 0; r < count; ++r) field[cells[r]] += values[r];
}

}  // namespace

template <class T>
SCIPROXY_WAVE_SCALAR_FORWARD(T) {
  (void)context;
  const Grid<T> g(p);
  const std::int64_t np = g.points, ns = p.nshots;
  for (std::int64_t shot = 0; shot < ns; ++shot) {
    const T* v = p.v + (p.v_batched ? shot * np : 0);
    ShotState<T> st(fields, p.ndim, shot, np);
    for (std::int64_t t = 0; t < p.nt; ++t) {
      throw_if_cancelled("scalar (reference)", shot * p.nt + t, ns * p.nt);
      record(st.u.data(), p.nreceivers, p.receiver_cells + shot * p.nreceivers,
             receivers + (t * ns + shot) * p.nreceivers);
      T* store = nullptr;
      if (stored && p.store_interval > 0 && t % p.store_interval == 0) {
        store = stored + ((t / p.store_interval) * ns + shot) * np;
        std::fill(store, store + np, T(0));
      }
      forward_step<T>(p, g, v, st, store, nullptr, static_cast<const T*>(nullptr), nullptr);
      inject(st.u_prev.data(), p.nsources, p.source_cells + shot * p.nsources,
             sources + (t * ns + shot) * p.nsources);
      std::swap(st.u, st.u_prev);
      st.swap_aux(p.ndim);
    }
    st.store(fields, p.ndim, shot);
  }
}

template <class T>
SCIPROXY_WAVE_SCALAR_BACKWARD(T) {
  (void)context;
  const Grid<T> g(p);
  const std::int64_t np = g.points, ns = p.nshots;
  const double dt2 = p.dt2;
  for (std::int64_t shot = 0; shot < ns; ++shot) {
    const T* v = p.v + (p.v_batched ? shot * np : 0);
    T* gv = grad_v ? grad_v + (p.v_batched ? shot * np : 0) : nullptr;
    ShotState<T> st(fields, p.ndim, shot, np);             // u: lambda, the adjoint of u^{t+1}
    std::vector<double> gl(static_cast<std::size_t>(np));  // g = v^2 dt^2 lambda (zero in the halo)
    for (std::int64_t t = p.nt - 1; t >= 0; --t) {
      throw_if_cancelled("scalar_gradient (reference backward)", shot * p.nt + (p.nt - 1 - t),
                         ns * p.nt);
      record(st.u.data(), p.nsources, p.source_cells + shot * p.nsources,
             grad_sources + (t * ns + shot) * p.nsources);
      if (stored && gv && p.store_interval > 0 && t % p.store_interval == 0) {
        const T* store = stored + ((t / p.store_interval) * ns + shot) * np;
        g.for_each_cell([&](std::int64_t i, const std::array<std::int64_t, kMaxDims>&) {
          gv[i] =
              static_cast<T>(gv[i] + static_cast<double>(p.store_interval) * st.u[i] * store[i]);
        });
      }
      for (std::int64_t i = 0; i < np; ++i)
        gl[i] = static_cast<double>(v[i]) * v[i] * dt2 * st.u[i];
      backward_step(p, g, st, gl);
      inject(st.u.data(), p.nreceivers, p.receiver_cells + shot * p.nreceivers,
             grad_receivers + (t * ns + shot) * p.nreceivers);
    }
    st.store(fields, p.ndim, shot);
  }
}

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T) {
  (void)context;
  const Grid<T> g(p);
  const std::int64_t np = g.points, ns = p.nshots;
  std::vector<double> w_bg(static_cast<std::size_t>(np), 0.0);
  for (std::int64_t shot = 0; shot < ns; ++shot) {
    const T* v = p.v + (p.v_batched ? shot * np : 0);
    const T* scatter = p.scatter + (p.v_batched ? shot * np : 0);
    ShotState<T> u(bg, p.ndim, shot, np), usc(sc, p.ndim, shot, np);
    for (std::int64_t t = 0; t < p.nt; ++t) {
      throw_if_cancelled("scalar_born (reference)", shot * p.nt + t, ns * p.nt);
      record(usc.u.data(), p.nreceivers, p.receiver_cells + shot * p.nreceivers,
             receivers + (t * ns + shot) * p.nreceivers);
      record(u.u.data(), p.nbg_receivers, p.bg_receiver_cells + shot * p.nbg_receivers,
             bg_receivers + (t * ns + shot) * p.nbg_receivers);
      forward_step<T>(p, g, v, u, nullptr, &w_bg, static_cast<const T*>(nullptr), nullptr);
      forward_step<T>(p, g, v, usc, nullptr, nullptr, scatter, &w_bg);
      inject(u.u_prev.data(), p.nsources, p.source_cells + shot * p.nsources,
             sources + (t * ns + shot) * p.nsources);
      inject(usc.u_prev.data(), p.nsources, p.source_cells + shot * p.nsources,
             scattered_sources + (t * ns + shot) * p.nsources);
      for (ShotState<T>* st : {&u, &usc}) {
        std::swap(st->u, st->u_prev);
        st->swap_aux(p.ndim);
      }
    }
    u.store(bg, p.ndim, shot);
    usc.store(sc, p.ndim, shot);
  }
}

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T) {
  (void)context;
  const Grid<T> g(p);
  const std::int64_t np = g.points, ns = p.nshots;
  const double dt2 = p.dt2;
  std::vector<double> gl(static_cast<std::size_t>(np)), gl_sc(static_cast<std::size_t>(np));
  for (std::int64_t shot = 0; shot < ns; ++shot) {
    const T* v = p.v + (p.v_batched ? shot * np : 0);
    const T* scatter = p.scatter + (p.v_batched ? shot * np : 0);
    ShotState<T> lam(bg, p.ndim, shot, np), lam_sc(sc, p.ndim, shot, np);
    for (std::int64_t t = p.nt - 1; t >= 0; --t) {
      throw_if_cancelled("scalar_born_gradient (reference backward)", shot * p.nt + (p.nt - 1 - t),
                         ns * p.nt);
      record(lam.u.data(), p.nsources, p.source_cells + shot * p.nsources,
             grad_sources + (t * ns + shot) * p.nsources);
      record(lam_sc.u.data(), p.nsources, p.source_cells + shot * p.nsources,
             grad_scattered_sources + (t * ns + shot) * p.nsources);
      for (std::int64_t i = 0; i < np; ++i) {
        const double vi = v[i];
        gl_sc[i] = vi * vi * dt2 * lam_sc.u[i];
        gl[i] =
            vi * vi * dt2 * lam.u[i] + 2 * vi * static_cast<double>(scatter[i]) * dt2 * lam_sc.u[i];
      }
      backward_step(p, g, lam, gl);
      backward_step(p, g, lam_sc, gl_sc);
      inject(lam_sc.u.data(), p.nreceivers, p.receiver_cells + shot * p.nreceivers,
             grad_receivers + (t * ns + shot) * p.nreceivers);
      inject(lam.u.data(), p.nbg_receivers, p.bg_receiver_cells + shot * p.nbg_receivers,
             grad_bg_receivers + (t * ns + shot) * p.nbg_receivers);
    }
    lam.store(bg, p.ndim, shot);
    lam_sc.store(sc, p.ndim, shot);
  }
}

template SCIPROXY_WAVE_SCALAR_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BACKWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(double);

}  // namespace sciproxy::wave::kernels::reference
