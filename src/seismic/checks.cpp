// Argument checks shared by the wave and tti families (checks.hpp).
#include "checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sciproxy/core/error.hpp"

namespace sciproxy::seismic {

std::int64_t Grid::cells() const {
  std::int64_t c = 1;
  for (int d = 0; d < std::clamp(ndim, 0, kMaxDims); ++d) c *= shape[d];
  return c;
}

namespace {
std::string join(const std::int64_t* x, int n, const char* sep) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? sep : "") + std::to_string(x[i]);
  return s;
}
}  // namespace

std::string shape_string(const Grid& grid) {
  return join(grid.shape.data(), grid.ndim, " x ");
}

void check_grid(const Grid& grid) {
  // The grid is the shape of the model v (Python's v, C's v with ndim and shape): its messages
  // name v, the argument every interface has, not the C++ struct that carries the shape.
  require(grid.ndim >= 1 && grid.ndim <= kMaxDims, "v", "a model of 1, 2 or 3 dimensions",
          fmt::format("{} dimensions", grid.ndim));
  for (int d = 0; d < grid.ndim; ++d) {
    require(grid.shape[d] >= 1, "v", fmt::format("at least 1 cell along dimension {}", d),
            std::to_string(grid.shape[d]));
    require(std::isfinite(grid.spacing[d]) && grid.spacing[d] > 0,
            fmt::format("grid_spacing[{}]", d), "a positive, finite cell size in metres",
            fmt::format("{}", grid.spacing[d]));
  }
}

bool is_ignored(const std::int64_t* location, int ndim) {
  return std::all_of(location, location + ndim,
                     [](std::int64_t c) { return c == kIgnoreLocation; });
}

void check_locations(std::span<const std::int64_t> loc, std::int64_t nshots, std::int64_t count,
                     const Grid& grid, const char* name, const char* what, bool allow_ignored) {
  const int ndim = grid.ndim;
  require(static_cast<std::int64_t>(loc.size()) == nshots * count * ndim, name,
          fmt::format("[nshots, n{}s, ndim] = [{}, {}, {}], {} values", what, nshots, count, ndim,
                      nshots * count * ndim),
          fmt::format("{} values", loc.size()));
  for (std::int64_t s = 0; s < nshots; ++s)
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t* x = loc.data() + (s * count + k) * ndim;
      if (allow_ignored && is_ignored(x, ndim)) continue;
      for (int d = 0; d < ndim; ++d)
        if (x[d] < 0 || x[d] >= grid.shape[d])
          throw_invalid_argument(
              name, fmt::format("cell indices inside the model (shape {})", shape_string(grid)),
              fmt::format("[{}] for shot {}, {} {} (index {} of dimension {})", join(x, ndim, ", "),
                          s, what, k, x[d], d));
    }
}

}  // namespace sciproxy::seismic
