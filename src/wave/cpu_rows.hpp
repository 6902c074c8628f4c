// Scalar wave propagator, CPU backend: the AVX-512 primitives that the forward and adjoint rows
// share (simd.hpp's vectors with the stencil neighbours of a cell), and the row layout of the
// vector loops. See cpu_blocking.hpp for the backend as a whole.
#pragma once

#include "cpu_blocking.hpp"

#if defined(SCIPROXY_WAVE_SIMD)
namespace sciproxy::wave::kernels::cpu::detail {
namespace {

using std::int64_t;

// ---------------------------------------------------------------------------------------------
// AVX-512 segments (simd.hpp). They do the per-cell arithmetic of plain_segment,
// forward_segment, backward_segment and plain_adjoint_segment (Born aside), in the same order,
// one vector of W cells at a time. The contiguous dimension's neighbours come from sliding
// windows, the outer dimensions' from loads at j +- k s. GCC's loops load each neighbour
// unaligned, across two cache lines; a window loads one vector per W cells.

// The stencil neighbours of one field along one dimension, for the vector at j.
template <class T>
struct AlongWindow {  // the contiguous dimension
  const simd::Window<T>& w;
  typename simd::Simd<T>::V centre() const { return w.cur; }
  template <int K>
  typename simd::Simd<T>::V up() const {
    return w.template up<K>();
  }
  template <int K>
  typename simd::Simd<T>::V down() const {
    return w.template down<K>();
  }
};
template <bool FULL, class T>
struct AlongStride {  // an outer dimension of stride s; f points at cell j
  const T* f;
  int64_t s;
  typename simd::Simd<T>::Mask m;
  typename simd::Simd<T>::V c;
  typename simd::Simd<T>::V centre() const { return c; }
  template <int K>
  typename simd::Simd<T>::V up() const {
    return simd::Simd<T>::template load<FULL>(f + K * s, m);
  }
  template <int K>
  typename simd::Simd<T>::V down() const {
    return simd::Simd<T>::template load<FULL>(f - K * s, m);
  }
};

// Runs body.template operator()<FULL>(j, mask) over the vectors of [j0, j1): the whole ones with
// FULL (unmasked loads and stores), then the partial one, if any, masked.
template <class T, class Body>
inline void over_vectors(int64_t j0, int64_t j1, Body&& body) {
  using S = simd::Simd<T>;
  int64_t j = j0;
  for (; j + S::W <= j1; j += S::W) body.template operator()<true>(j, S::first(S::W));
  if (j < j1) body.template operator()<false>(j, S::first(j1 - j));
}

// diff2 and diff1 (math.hpp) of a vector of cells, in the same order.
template <int A, class T, class Along>
inline typename simd::Simd<T>::V vdiff2(const Along& f, T rdx2) {
  typename simd::Simd<T>::V sum = T(d2_coefficient<A>(0)) * f.centre();
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += T(d2_coefficient<A>(K + 1)) * (f.template up<K + 1>() + f.template down<K + 1>())),
     ...);
  }
  (std::make_integer_sequence<int, A / 2>{});
  return sum * rdx2;
}
template <int A, class T, class Along>
inline typename simd::Simd<T>::V vdiff1(const Along& f, T rdx) {
  typename simd::Simd<T>::V sum = simd::Simd<T>::zero();
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += T(d1_coefficient<A>(K + 1)) * (f.template up<K + 1>() - f.template down<K + 1>())),
     ...);
  }
  (std::make_integer_sequence<int, A / 2>{});
  return sum * rdx;
}

// With the weights of FoldedStencils: acc + sum_k w[k] (f[j + k] + f[j - k]), and
// sum_k w[k] (f[j + k] - f[j - k]), k = 1 .. H.
template <int H, class T, class Along>
inline typename simd::Simd<T>::V add_pairs(typename simd::Simd<T>::V acc, const Along& f,
                                           const T* w) {
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((acc += w[K + 1] * (f.template up<K + 1>() + f.template down<K + 1>())), ...);
  }
  (std::make_integer_sequence<int, H>{});
  return acc;
}
template <int H, class T, class Along>
inline typename simd::Simd<T>::V differences(const Along& f, const T* w) {
  typename simd::Simd<T>::V sum = w[1] * (f.template up<1>() - f.template down<1>());
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += w[K + 2] * (f.template up<K + 2>() - f.template down<K + 2>())), ...);
  }
  (std::make_integer_sequence<int, H - 1>{});
  return sum;
}

// Calls f.template operator()<D>() for D = 0 .. N-1 in order.
template <int N, class F>
inline void for_dims(F&& f) {
  [&]<int... D>(std::integer_sequence<int, D...>) {
    (f.template operator()<D>(), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// The layout of one row of [j0, j1) for the vector loops: the mask of the outer dimensions in
// whose PML the row lies, and the contiguous dimension's PML strips [j0, a) and [b, j1) around
// its plain cells [a, b). a and b lie on the vector grid from j0 (the strips are widened into the
// plain cells, where the C-PML formula is exact: a = b = b' = 0 reduce it to the plain stencil
// and it writes zeros), so one window runs through the row and only its last vector is partial.
struct RowLayout {
  unsigned outer;
  int64_t a, b;
};
template <int NDIM, int V>
inline RowLayout row_layout(const std::array<int64_t, 3>& x, const std::array<int64_t, 3>& plain_lo,
                            const std::array<int64_t, 3>& plain_hi, int64_t j0, int64_t j1) {
  constexpr int L = NDIM - 1;
  RowLayout r{0, 0, 0};
  for (int d = 0; d < L; ++d)
    if (x[d] < plain_lo[d] || x[d] >= plain_hi[d]) r.outer |= 1u << d;
  r.a = std::clamp(plain_lo[L], j0, j1);
  r.b = std::clamp(plain_hi[L], r.a, j1);
  if (r.a > j0) r.a = std::min(j1, j0 + (r.a - j0 + V - 1) / V * V);
  r.b = std::max(r.b, r.a);
  if (r.b < j1) r.b = r.a + (r.b - r.a) / V * V;
  return r;
}

}  // namespace
}  // namespace sciproxy::wave::kernels::cpu::detail

#endif  // SCIPROXY_WAVE_SIMD
