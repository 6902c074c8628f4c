// Band-limited resampling of source and receiver traces by an integer step ratio, Deepwave's
// method (deepwave/_common.py upsample, downsample), and the exact adjoints of both linear maps.
//
// upsample (nt -> nt r samples): zero-pad nt_pad = floor(time_pad_frac nt) samples, X = rfft(x)
//   (orthonormal) * sqrt(r), cosine-taper the last floor(freq_taper_frac * #bins) bins, zero the
//   Nyquist bin when the padded length is even, zero-extend the spectrum, y = irfft (orthonormal)
//   of length (nt + nt_pad) r, drop the padding, optionally multiply by a Hann window.
// downsample (nt r -> nt samples): optional Hann window, zero-pad floor(time_pad_frac nt) r
//   samples, keep the lowest (nt + nt_pad)/2 + 1 bins, taper them, zero the new Nyquist bin when
//   the output length is even, irfft / sqrt(r), drop the padding.
// Both are the identity when step_ratio is 1 (no FFT, tapers ignored, as in Deepwave).
//
// Each map is y = E irfft_M(D rfft_N(P x)) with P, E zero-padding / truncation and windows, D a
// real diagonal on the first K bins. Writing irfft_M as sum_k w_k Re(Y_k e^{2 pi i k m / M}) with
// w_k = 1 for the DC and Nyquist bins and 2 otherwise, the transpose of the middle part is the same
// operation from M back to N with D_k replaced by D_k w_k(M) / w_k(N): that is how the adjoints
// are computed (checked by dot-product tests). Arithmetic in double for both float and double.
#pragma once

#include <cstdint>

namespace sciproxy::wave::detail {

struct Resampling {
  std::int64_t step_ratio = 1;
  double freq_taper_frac = 0;
  double time_pad_frac = 0;
  bool time_taper = false;
};

// x: [ntraces, nt] -> y: [ntraces, nt * step_ratio]
template <class T>
void upsample(const T* x, std::int64_t ntraces, std::int64_t nt, const Resampling& r, T* y);
// Adjoint of upsample: y: [ntraces, nt * step_ratio] -> x: [ntraces, nt]
template <class T>
void upsample_adjoint(const T* y, std::int64_t ntraces, std::int64_t nt, const Resampling& r, T* x);
// x: [ntraces, nt * step_ratio] -> y: [ntraces, nt]
template <class T>
void downsample(const T* x, std::int64_t ntraces, std::int64_t nt, const Resampling& r, T* y);
// Adjoint of downsample: y: [ntraces, nt] -> x: [ntraces, nt * step_ratio]
template <class T>
void downsample_adjoint(const T* y, std::int64_t ntraces, std::int64_t nt, const Resampling& r,
                        T* x);

}  // namespace sciproxy::wave::detail
