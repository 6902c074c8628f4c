// Error norms of a result against its reference. Accumulates in double whatever the dtypes.
#include "sciproxy/core/verify.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/json.hpp"

namespace sciproxy {

template <class T, class U>
Comparison compare(std::span<const T> out, std::span<const U> ref, const Tolerance& tol) {
  Comparison c;
  c.count = out.size();
  c.shapes_match = out.size() == ref.size();
  if (!c.shapes_match) return c;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = static_cast<double>(out[i]);
    const double r = static_cast<double>(ref[i]);
    if (!std::isfinite(o)) ++c.nan_out;
    if (!std::isfinite(r)) ++c.nan_ref;
    const double d = std::abs(o - r);
    // A NaN difference is the worst of all and stays so.
    const bool worse =
        std::isnan(d) ? !std::isnan(c.max_abs) : (!std::isnan(c.max_abs) && d > c.max_abs);
    if (worse) {
      c.max_abs = d;
      c.worst_index = i;
    }
    if (r != 0 && std::isfinite(d)) c.max_rel = std::max(c.max_rel, d / std::abs(r));
    diff2 += d * d;
    ref2 += r * r;
  }
  c.ref_norm = std::sqrt(ref2);
  c.rel_l2 = c.ref_norm > 0 ? std::sqrt(diff2) / c.ref_norm : std::sqrt(diff2);
  c.pass = c.nan_out == 0 && c.nan_ref == 0 && c.rel_l2 <= tol.rel_l2 && c.max_abs <= tol.max_abs;
  return c;
}

std::string Comparison::summary() const {
  if (!shapes_match) return "FAIL: the result and the reference differ in size";
  std::string s = fmt::format("{}: rel L2 {:.3e}, max abs {:.3e}, max rel {:.3e}, worst at [{}]",
                              pass ? "PASS" : "FAIL", rel_l2, max_abs, max_rel, worst_index);
  if (nan_out || nan_ref)
    s += fmt::format(", non-finite: {} in result, {} in reference", nan_out, nan_ref);
  return s;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j = {{"pass", c.pass},
                      {"count", c.count},
                      {"rel_l2", c.rel_l2},
                      {"max_abs", c.max_abs},
                      {"max_rel", c.max_rel},
                      {"worst_index", c.worst_index},
                      {"nonfinite_result", c.nan_out},
                      {"nonfinite_reference", c.nan_ref},
                      {"shapes_match", c.shapes_match}};
  if (!c.output.empty()) j["output"] = c.output;
  return j;
}

template Comparison compare<float, float>(std::span<const float>, std::span<const float>,
                                          const Tolerance&);
template Comparison compare<double, double>(std::span<const double>, std::span<const double>,
                                            const Tolerance&);
template Comparison compare<float, double>(std::span<const float>, std::span<const double>,
                                           const Tolerance&);
template Comparison compare<double, float>(std::span<const double>, std::span<const float>,
                                           const Tolerance&);

}  // namespace sciproxy
