// Comparison of a result with its reference: relative L2 error ||out - ref|| / ||ref||, max abs
// and max rel error, where the worst error is, NaN detection. NaN in either array never passes.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>

namespace sciproxy {

struct Tolerance {
  double rel_l2 = 0;                                         // bound on ||out-ref|| / ||ref||
  double max_abs = std::numeric_limits<double>::infinity();  // bound on max |out-ref|
};

struct Comparison {
  std::string output;  // the output compared ("receiver_amplitudes"); empty for a single one
  std::size_t count = 0;
  std::size_t nan_out = 0, nan_ref = 0;  // non-finite values in each array
  double rel_l2 = 0, max_abs = 0, max_rel = 0;
  double ref_norm = 0;
  std::size_t worst_index = 0;  // flat index of the largest absolute error
  bool shapes_match = true;
  bool pass = false;

  std::string summary() const;  // one line: pass/FAIL, errors, worst index
};

template <class T, class U>
Comparison compare(std::span<const T> out, std::span<const U> ref, const Tolerance& tol);

}  // namespace sciproxy
