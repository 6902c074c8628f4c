// The specex family's backend test, compiled once per backend (test_specex_cpu,
// test_specex_cuda; tests/common/backend_test.hpp): ex2d and ex2d_patch on the backend against
// the reference on simulated frames of both PSF files, both decorrelation modes, regularisation,
// masked pixels, thread counts (results identical for any count), and the timer regions.
// Tolerance: specex/case.hpp (relative L2 1e-8 for flux, ivar and the resolution diagonals).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/specex.hpp"
#include "specex/case.hpp"

using namespace sciproxy;
using namespace sciproxy::specex;
using test::kBackend;
using test::kReference;

namespace {

const std::string kData = test::test_data_dir() + "/specex/";

class SpecexBackend : public test::BackendTest {};

struct Frame {
  Psf psf;
  std::vector<double> wavelengths;
  SimulatedImage sim;
  ImageInput input() const {
    return {sim.image, sim.ivar, sim.range.ny(), sim.range.nx(), sim.range};
  }
};

Frame simulate(const std::string& file, int nspec, double w0, int nwave, double dw,
               std::uint64_t seed) {
  Frame f{Psf::load(kData + file), {}, {}};
  f.wavelengths = wavelength_grid(w0, w0 + (nwave - 1) * dw, dw);
  f.wavelengths.resize(nwave);
  const auto wide = wavelength_grid(w0 - 20 * dw, w0 + (nwave + 20) * dw, dw);
  std::mt19937_64 rng(seed);
  std::vector<double> phot(nspec * wide.size());
  for (auto& v : phot) v = 100 + 900 * double(rng() >> 11) * 0x1.0p-53;
  PixelRange r = f.psf.xyrange(0, nspec, wide.front(), wide.back());
  f.sim = simulate_image(f.psf, wide, phot, 0, r, 3.0, seed);
  return f;
}

void expect_close(const std::string& what, const std::vector<double>& got,
                  const std::vector<double>& ref) {
  const Comparison c = compare<double, double>(std::span<const double>(got),
                                               std::span<const double>(ref), ex2d_tolerance());
  EXPECT_TRUE(c.pass) << what << ": " << c.summary();
}

std::vector<double> complement(std::vector<double> fraction) {
  for (double& x : fraction) x = 1 - x;
  return fraction;
}

void compare_ex2d(const Frame& f, int nspec, Ex2dOptions o) {
  const auto got = ex2d(kBackend, f.psf, f.input(), 0, nspec, f.wavelengths, o);
  const auto ref = ex2d(kReference, f.psf, f.input(), 0, nspec, f.wavelengths, o);
  expect_close("flux", got.flux, ref.flux);
  expect_close("ivar", got.ivar, ref.ivar);
  expect_close("resolution", got.resolution, ref.resolution);
  expect_close("chi2pix", got.chi2pix, ref.chi2pix);
  // pixmask_fraction = 1 - (the unmasked part of a bin's PSF weights, which sum to about 1): where
  // nothing is masked it is rounding noise of order 1e-16, whose digits depend on the order of the
  // sum. Its error is relative to 1, so the unmasked parts are compared.
  expect_close("1 - pixmask_fraction", complement(got.pixmask_fraction),
               complement(ref.pixmask_fraction));
  expect_close("model", got.model, ref.model);
}

TEST_F(SpecexBackend, SignalModeMatchesReference) {
  const Frame f = simulate("psf-r0-00067784.fits", 10, 6000, 120, 0.8, 1);
  Ex2dOptions o;
  o.bundlesize = 10;
  o.nsubbundles = 2;
  compare_ex2d(f, 10, o);
}

TEST_F(SpecexBackend, NoiseModeAndRegularisationMatchReference) {
  const Frame f = simulate("psf-r0-00067784.fits", 5, 7000, 60, 1.0, 2);
  Ex2dOptions o;
  o.bundlesize = 5;
  o.ndecorr = true;
  o.regularize = 0.1;
  o.wavesize = 30;
  compare_ex2d(f, 5, o);
}

TEST_F(SpecexBackend, TailedPsfAndMaskedPixelsMatchReference) {
  Frame f = simulate("psf-gausshermite.fits", 5, 6000, 60, 1.0, 3);
  for (std::size_t k = 0; k < f.sim.ivar.size(); k += 37) f.sim.ivar[k] = 0;
  Ex2dOptions o;
  o.bundlesize = 5;
  o.wavesize = 30;
  compare_ex2d(f, 5, o);
}

TEST_F(SpecexBackend, PatchMatchesReferenceInBothModes) {
  const Frame f = simulate("psf-r0-00067784.fits", 5, 6500, 50, 0.8, 4);
  const PixelRange r = f.psf.xyrange(0, 5, f.wavelengths.front(), f.wavelengths.back());
  // The patch's cut-out of the simulated image.
  std::vector<double> image, ivar;
  for (std::int64_t y = r.ymin; y < r.ymax; ++y)
    for (std::int64_t x = r.xmin; x < r.xmax; ++x) {
      const auto k = (y - f.sim.range.ymin) * f.sim.range.nx() + (x - f.sim.range.xmin);
      image.push_back(f.sim.image[k]);
      ivar.push_back(f.sim.ivar[k]);
    }
  const ImageInput in{image, ivar, r.ny(), r.nx(), r};
  for (const bool ndecorr : {false, true}) {
    const auto got = ex2d_patch(kBackend, f.psf, in, 0, 5, f.wavelengths, 0.0, ndecorr);
    const auto ref = ex2d_patch(kReference, f.psf, in, 0, 5, f.wavelengths, 0.0, ndecorr);
    expect_close("flux", got.flux, ref.flux);
    expect_close("ivar", got.ivar, ref.ivar);
    expect_close("R", got.resolution, ref.resolution);
    expect_close("xflux", got.xflux, ref.xflux);
    expect_close("iCov", got.icov, ref.icov);
  }
}

TEST_F(SpecexBackend, SameResultForAnyThreadCount) {
  const Frame f = simulate("psf-r0-00067784.fits", 10, 6200, 100, 0.8, 5);
  Ex2dOptions o;
  o.bundlesize = 10;
  o.nsubbundles = 5;
  o.nparallel = 1;
  const auto one = ex2d(kBackend, f.psf, f.input(), 0, 10, f.wavelengths, o);
  o.nparallel = 2;
  const auto two = ex2d(kBackend, f.psf, f.input(), 0, 10, f.wavelengths, o);
  EXPECT_EQ(one.flux, two.flux);
  EXPECT_EQ(one.ivar, two.ivar);
  EXPECT_EQ(one.resolution, two.resolution);
  EXPECT_EQ(one.model, two.model);
}

TEST_F(SpecexBackend, RecordsItsRegions) {
  const Frame f = simulate("psf-r0-00067784.fits", 5, 6200, 50, 0.8, 6);
  Ex2dOptions o;
  o.bundlesize = 5;
  Timers timers;
  ex2d(kBackend, f.psf, f.input(), 0, 5, f.wavelengths, o, &timers);
  bool decorrelate = false;
  for (const auto& s : timers.stats()) decorrelate |= s.leaf() == "decorrelate";
  EXPECT_TRUE(decorrelate) << timers.table();
}

}  // namespace
