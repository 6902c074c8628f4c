// Per-trace index arithmetic of parstack (docs/kernels/parstack.md), shared by the CPU loops and
// the CUDA kernels.
// Trace i under shift set s starts at output sample  start = offsets[i] + shifts[s,i] - offsetout,
// so output sample k reads a_i[k - start] and the trace covers k in [max(0, start),
// min(lengthout, start + length_i)). 64-bit throughout: pyrocko's int32 sums can overflow.
#pragma once

#include <cstdint>
#include <limits>

#include "core/hd.hpp"

namespace sciproxy::stack {

struct Overlap {
  std::int64_t begin = 0, end = 0;  // output samples [begin, end); empty when begin == end
};

SCIPROXY_HD std::int64_t trace_start(std::int32_t offset, std::int32_t shift,
                                     std::int32_t offsetout) {
  return static_cast<std::int64_t>(offset) + shift - offsetout;
}

SCIPROXY_HD Overlap trace_overlap(std::int64_t start, std::int64_t length, std::int64_t lengthout) {
  Overlap o;
  o.begin = start > 0 ? start : 0;
  const std::int64_t stop = start + length;
  o.end = stop < lengthout ? stop : lengthout;
  if (o.end < o.begin) o.end = o.begin;
  return o;
}

// Method 1 starts its running maximum here: -inf gives the true maximum, 0 pyrocko's clamp.
template <class T>
SCIPROXY_HD T max_initial_value(bool clamp_max_at_zero) {
  return clamp_max_at_zero ? T(0) : -std::numeric_limits<T>::infinity();
}

// argmax's step: does v replace the running maximum `best`? numpy's argmax returns the first
// NaN of a column (NaN propagates like a maximum), so a NaN wins over any number and nothing
// replaces a NaN. pyrocko's C code compares with `>` only, so NaN never wins there:
// pyrocko_compat keeps that, and reproduces pyrocko's output exactly (docs/kernels/parstack.md).
// Written with comparisons only (v != v is NaN), so it vectorises and needs no <cmath> on the GPU.
SCIPROXY_HD bool argmax_replaces(double v, double best, bool pyrocko_compat) {
  if (pyrocko_compat) return v > best;
  return v > best || (v != v && best == best);
}

}  // namespace sciproxy::stack
