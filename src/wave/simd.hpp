// AVX-512 vectors of float or double for the stencil loops of the CPU backend, with GCC's vector
// operators (+ - * and scalar broadcast; contracted to FMA as the scalar code is) and the sliding
// window along the contiguous dimension:
//   lane l of up<K>(cur, next) = f[j + l + K],  lane l of down<K>(prev, cur) = f[j + l - K]
// for prev, cur, next the vectors at j - W, j, j + W. One new load per W cells replaces the
// 2 * radius + 1 unaligned loads of a stencil row, each of which straddles two cache lines
// (bench/scalar_cpu_notes.md: the 2-D accuracy-4 plain loop went from 21-24 to 11-13 cycles per
// 16 cells). Masked loads and stores handle segment ends (masked-off lanes are never touched);
// the loops run their whole vectors unmasked (`FULL`) and a last partial one masked.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

#define SCIPROXY_WAVE_SIMD 1

namespace sciproxy::wave::simd {

template <class T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int W = 16;
  static Mask first(std::int64_t n) {  // the lanes [0, n)
    return n >= W ? Mask(0xFFFF) : n <= 0 ? Mask(0) : Mask((1u << n) - 1);
  }
  // FULL: all lanes (m is ignored), without the mask, which costs a masked store on Zen 4.
  template <bool FULL = false>
  static V load(const float* p, Mask m) {
    if constexpr (FULL)
      return _mm512_loadu_ps(p);
    else
      return _mm512_maskz_loadu_ps(m, p);
  }
  template <bool FULL = false>
  static void store(float* p, V v, Mask m) {
    if constexpr (FULL)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, m, v);
  }
  static V zero() { return _mm512_setzero_ps(); }
  // The all-lanes masked valignd: GCC 12's unmasked form starts from an undefined vector and
  // warns (-Wmaybe-uninitialized) at every use.
  template <int K>
  static V align(V hi, V lo) {
    return _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(Mask(0xFFFF), _mm512_castps_si512(hi),
                                                         _mm512_castps_si512(lo), K));
  }
};

template <>
struct Simd<double> {
  using V = __m512d;
  using Mask = __mmask8;
  static constexpr int W = 8;
  static Mask first(std::int64_t n) {
    return n >= W ? Mask(0xFF) : n <= 0 ? Mask(0) : Mask((1u << n) - 1);
  }
  // FULL: all lanes (m is ignored), without the mask, which costs a masked store on Zen 4.
  template <bool FULL = false>
  static V load(const double* p, Mask m) {
    if constexpr (FULL)
      return _mm512_loadu_pd(p);
    else
      return _mm512_maskz_loadu_pd(m, p);
  }
  template <bool FULL = false>
  static void store(double* p, V v, Mask m) {
    if constexpr (FULL)
      _mm512_storeu_pd(p, v);
    else
      _mm512_mask_storeu_pd(p, m, v);
  }
  static V zero() { return _mm512_setzero_pd(); }
  template <int K>
  static V align(V hi, V lo) {
    return _mm512_castsi512_pd(
        _mm512_maskz_alignr_epi64(Mask(0xFF), _mm512_castpd_si512(hi), _mm512_castpd_si512(lo), K));
  }
};

// A window of one field along the contiguous dimension: the vectors at j - W, j, j + W.
template <class T>
struct Window {
  using S = Simd<T>;
  using V = typename S::V;
  V prev, cur, next;

  // The window at j0 of a segment [j0, j1) whose stencils reach h cells beyond it.
  static Window start(const T* f, std::int64_t j0, std::int64_t j1, int h) {
    Window w;
    w.prev = S::load(f + j0 - S::W, typename S::Mask(~0u << (S::W - h)));
    w.cur = S::load(f + j0, S::first(j1 + h - j0));
    w.next = S::zero();
    return w;
  }
  // Loads the vector at j + W (the lanes the stencils of [j, j1) read).
  void fetch(const T* f, std::int64_t j, std::int64_t j1, int h) {
    const std::int64_t needed = j1 + h - j - S::W;
    next = needed >= S::W ? S::template load<true>(f + j + S::W, 0)
                          : S::load(f + j + S::W, S::first(needed));
  }
  void advance() {
    prev = cur;
    cur = next;
  }
  template <int K>
  V up() const {
    return S::template align<K>(next, cur);
  }
  template <int K>
  V down() const {
    return S::template align<S::W - K>(cur, prev);
  }
};

}  // namespace sciproxy::wave::simd

#endif
