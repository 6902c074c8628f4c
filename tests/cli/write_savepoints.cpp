// tests/cli/write_savepoints.cpp: writes the savepoints the CLI tests of `sciproxy verify` compare,
// with errors known in advance, into the directory given as the only argument.
//   ref.nc      the reference (call-diffusion-exit): vn (cell=4, k=3) = 1..12, w (cell=4) = 0,
//               mask (cell=4, k=3) handed over in Fortran order; linit, date, dtime, jstep
//   same.nc     a copy of ref.nc
//   off.nc      vn off by 0.01 at (0, 0) and by 0.5 at (2, 1): max rel 0.0625 (0.5 / 8)
//   missing.nc  no w, and a field rho the reference lacks
//   shape.nc    vn over (cell=5, k=3)
//   nan.nc      vn NaN at (1, 2)
//   tol_pass.txt, tol_tight.txt, tol_unknown.txt, tol_bad.txt: tolerance files
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "sciproxy/core/savepoint.hpp"

namespace sp = sciproxy::savepoint;

namespace {

sp::SavepointWriter savepoint(const std::vector<double>& vn, bool with_w = true) {
  sp::SavepointWriter w("call-diffusion-exit");
  w.set("linit", false).set("date", "2021-06-20T12:00:10.000").set("dtime", 10.0).set("jstep", 1);
  w.add_field("vn", vn, {"cell", "k"}, {vn.size() / 3, 3});
  if (with_w) w.add_field("w", std::vector<double>(vn.size() / 3, 0.0), {"cell"}, {vn.size() / 3});
  // mask(c, k) = 10 c + k, the first index fastest (a Fortran array).
  std::vector<std::int32_t> mask(vn.size());
  const std::size_t ncell = vn.size() / 3;
  for (std::size_t c = 0; c < ncell; ++c)
    for (std::size_t k = 0; k < 3; ++k) mask[c + ncell * k] = static_cast<std::int32_t>(10 * c + k);
  w.add_field("mask", mask, {"cell", "k"}, {ncell, 3}, sp::Layout::column_major);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_savepoints DIR\n");
    return 2;
  }
  const std::string dir = std::string(argv[1]) + "/";
  try {
    std::vector<double> ref(12);
    std::iota(ref.begin(), ref.end(), 1.0);
    savepoint(ref).write(dir + "ref.nc");
    savepoint(ref).write(dir + "same.nc");
    auto off = ref;
    off[0] += 0.01;
    off[2 * 3 + 1] += 0.5;
    savepoint(off).write(dir + "off.nc");
    auto missing = savepoint(ref, false);
    missing.add_field("rho", std::vector<float>{1.0f, 2.0f, 3.0f}, {"k"}, {3});
    missing.write(dir + "missing.nc");
    std::vector<double> five(15);
    std::iota(five.begin(), five.end(), 1.0);
    savepoint(five).write(dir + "shape.nc");
    auto nan = ref;
    nan[1 * 3 + 2] = std::numeric_limits<double>::quiet_NaN();
    savepoint(nan).write(dir + "nan.nc");
    std::ofstream(dir + "tol_pass.txt") << "# field rtol atol\nvn 0.07 0\n* 1e-12 0\n";
    std::ofstream(dir + "tol_tight.txt") << "vn 0.05 0\n";
    std::ofstream(dir + "tol_unknown.txt") << "vn 0.07 0\nrho_ref 1 0\n";
    std::ofstream(dir + "tol_bad.txt") << "vn 0.07\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_savepoints: %s\n", e.what());
    return 1;
  }
  return 0;
}
