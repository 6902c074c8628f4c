// Argument checks shared by the wave propagators (scalar, Born and TTI): the grid, and source and
// receiver locations given as cell indices [shot, source or receiver, dimension].
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sciproxy/seismic.hpp"

namespace sciproxy::seismic {

// "251 x 500": the first grid.ndim entries of grid.shape.
std::string shape_string(const Grid& grid);

// 1 to 3 dimensions, at least one cell in each, positive finite spacing.
void check_grid(const Grid& grid);

// A location whose coordinates are all kIgnoreLocation.
bool is_ignored(const std::int64_t* location, int ndim);

// loc holds [nshots, count, grid.ndim] cell indices inside the model; with allow_ignored, also
// locations at kIgnoreLocation. name: the argument, what: "source" or "receiver".
void check_locations(std::span<const std::int64_t> loc, std::int64_t nshots, std::int64_t count,
                     const Grid& grid, const char* name, const char* what, bool allow_ignored);

}  // namespace sciproxy::seismic
