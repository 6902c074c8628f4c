// parstack, reference backend: the definition of correct. Plain loops, double accumulation.
//   R[s, k] = sum_i w[s,i] * a_i[k - start(s,i)],  start = offsets[i] + shifts[s,i] - offsetout
//   M[s]    = max_k R[s, k]
// (pyrocko's parstack, docs/kernels/parstack.md; weights exactly 0 skip their trace.)
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "kernels.hpp"
#include "math.hpp"
#include "sciproxy/core/cancel.hpp"

namespace sciproxy::stack::kernels::reference {

template <class T>
SCIPROXY_STACK_PARSTACK(T) {
  (void)plan;  // device state only
  auto compute = Timers::region(ctx.timers, "compute");
  std::vector<double> row(static_cast<std::size_t>(p.lengthout));
  for (std::int64_t s = 0; s < p.nshifts; ++s) {
    throw_if_cancelled("parstack (reference)", s, p.nshifts, "shifts");
    std::fill(row.begin(), row.end(), 0.0);
    for (std::int64_t i = 0; i < p.ntraces; ++i) {
      const double w = p.weights[s * p.ntraces + i];
      if (w == 0) continue;
      const std::int64_t start =
          trace_start(p.offsets[i], p.shifts[s * p.ntraces + i], p.offsetout);
      const Overlap o = trace_overlap(start, p.lengths[i], p.lengthout);
      for (std::int64_t k = o.begin; k < o.end; ++k)
        row[k] += w * static_cast<double>(p.traces[i][k - start]);
    }
    if (p.method == Method::stack) {
      T* out = result + s * p.lengthout;
      for (std::int64_t k = 0; k < p.lengthout; ++k)
        out[k] = static_cast<T>((p.accumulate ? static_cast<double>(out[k]) : 0.0) + row[k]);
    } else {
      double m = max_initial_value<double>(p.clamp_max_at_zero);
      for (std::int64_t k = 0; k < p.lengthout; ++k) m = std::max(m, row[k]);
      result[s] = static_cast<T>(m);
    }
  }
}

template <class T>
SCIPROXY_STACK_ARGMAX(T) {
  (void)ctx;
  for (std::int64_t c = 0; c < cols; ++c) {
    // numpy: the first maximum (or the first NaN) wins. pyrocko: the running maximum starts at
    // DBL_MIN and NaN never wins (math.hpp: argmax_replaces).
    std::int64_t best = 0;
    double value = pyrocko_compat ? DBL_MIN : static_cast<double>(a[c]);
    for (std::int64_t r = pyrocko_compat ? 0 : 1; r < rows; ++r) {
      const double v = a[r * cols + c];
      if (argmax_replaces(v, value, pyrocko_compat)) {
        value = v;
        best = r;
      }
    }
    out[c] = static_cast<std::uint32_t>(best);
  }
}

template SCIPROXY_STACK_PARSTACK(float);
template SCIPROXY_STACK_PARSTACK(double);
template SCIPROXY_STACK_ARGMAX(float);
template SCIPROXY_STACK_ARGMAX(double);

}  // namespace sciproxy::stack::kernels::reference
