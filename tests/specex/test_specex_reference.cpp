// The specex reference against what can be checked by hand or analytically: Legendre sums,
// pixel-integrated Gauss-Hermite functions against numerical integration, the spot's extent
// (Python's int()), the PSF files' traces and their inverse, spots summing to one, the patch plan
// (specter's split_bundle, padding), and extraction properties: a noiseless frame gives back its
// spectra, resolution rows sum to one, chi2pix near one on a noisy frame, masked patches get ivar
// 0, and bad input is refused with the argument's name.
// The comparison with specter's own numbers is tests/python/test_specex_specter.py.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/specex.hpp"
#include "specex/math.hpp"

using namespace sciproxy;
using namespace sciproxy::specex;

namespace {

const std::string kData = SCIPROXY_TEST_DATA_DIR "/specex/";
const Device kRef{Backend::reference, 0, false};

const Psf& r0() {
  static const Psf psf = Psf::load(kData + "psf-r0-00067784.fits");
  return psf;
}

TEST(SpecexMath, LegendreSumMatchesClosedForms) {
  const double c[4] = {0.5, -1.0, 2.0, 0.25};
  for (const double u : {-1.0, -0.3, 0.0, 0.7, 1.0}) {
    const double p2 = 0.5 * (3 * u * u - 1), p3 = 0.5 * (5 * u * u * u - 3 * u);
    EXPECT_NEAR(legendre_sum(c, 4, u), 0.5 - u + 2 * p2 + 0.25 * p3, 1e-14);
  }
}

TEST(SpecexMath, SpotAxisTruncatesLikePython) {
  // int(x - h + 0.5) .. int(x + h + 1.5): truncation toward zero also for negative values.
  EXPECT_EQ(spot_axis(100.2, 8).start, 92);
  EXPECT_EQ(spot_axis(100.2, 8).n, 17);
  EXPECT_EQ(spot_axis(3.2, 8).start, -4);  // int(-4.3) = -4, not floor's -5
  EXPECT_EQ(spot_axis(3.2, 8).n, 16);
}

// g_m integrated over each pixel, against Simpson's rule on He_m(u) phi(u).
TEST(SpecexMath, IntegratedHermiteMatchesQuadrature) {
  const int degree = 6, n = 9;
  const double centre = 4.3, sigma = 1.1;
  std::vector<double> g((degree + 1) * n), edges(2 * (n + 1));
  integrated_hermite(degree, 0, n, centre, sigma, g.data(), edges.data());
  auto he = [](int m, double u) {
    double a = 1, b = u;
    if (m == 0) return a;
    for (int k = 2; k <= m; ++k) {
      const double c = u * b - (k - 1) * a;
      a = b;
      b = c;
    }
    return b;
  };
  for (int m = 0; m <= degree; ++m)
    for (int i = 0; i < n; ++i) {
      const double lo = (i - 0.5 - centre) / sigma, hi = (i + 0.5 - centre) / sigma;
      const int steps = 2000;
      double sum = 0;
      for (int k = 0; k <= steps; ++k) {
        const double u = lo + (hi - lo) * k / steps;
        const double w = (k == 0 || k == steps) ? 1 : (k % 2 ? 4 : 2);
        sum += w * he(m, u) * std::exp(-0.5 * u * u) / std::sqrt(2 * M_PI);
      }
      sum *= (hi - lo) / (3 * steps);
      EXPECT_NEAR(g[m * n + i], sum, 1e-10) << "m " << m << " pixel " << i;
    }
}

TEST(SpecexPsf, ReadsBothFileVersions) {
  const Psf& psf = r0();
  EXPECT_EQ(psf.model().version, 3);
  EXPECT_EQ(psf.nspec(), 500);
  EXPECT_EQ(psf.npix_x(), 4114);
  EXPECT_EQ(psf.npix_y(), 4128);
  EXPECT_EQ(psf.model().psferr, 0.01);  // PSFERROR = 0 is another program's setting
  // The traces on their own domains (5543-7826, the PSF HDU says 7827).
  EXPECT_EQ(psf.model().y.hi, 7826.0);
  EXPECT_EQ(psf.model().param_hi, 7827.0);
  // specter's wmin/wmax: lambda at rows -0.5 and npix_y - 0.5 (docs: 5545.90 / 7801.14).
  EXPECT_NEAR(psf.wmin(), 5545.90, 0.01);
  EXPECT_NEAR(psf.wmax(), 7801.14, 0.01);
  const Psf gh = Psf::load(kData + "psf-gausshermite.fits");
  EXPECT_EQ(gh.model().version, 2);
  EXPECT_EQ(gh.nspec(), 25);
  EXPECT_EQ(gh.model().hsizex, 14);
  EXPECT_TRUE(gh.model().has_tail);
}

TEST(SpecexPsf, InverseTraceInvertsTheTrace) {
  const Psf& psf = r0();
  for (const int ispec : {0, 250, 499})
    for (const double w : {5600.0, 6500.0, 7700.0})
      EXPECT_NEAR(psf.wavelength(ispec, psf.y(ispec, w)), w, 1e-3) << ispec << " " << w;
}

TEST(SpecexPsf, SpotsAreNormalisedAndCentred) {
  const Psf& psf = r0();
  for (const int ispec : {0, 17, 260, 499})
    for (const double w : {5700.0, 6600.0, 7500.0}) {
      const Spot s = psf.spot(ispec, w);
      ASSERT_EQ(s.ny, 2 * psf.model().hsizey + 1);
      ASSERT_EQ(s.nx, 2 * psf.model().hsizex + 1);
      EXPECT_NEAR(std::accumulate(s.pixels.begin(), s.pixels.end(), 0.0), 1.0, 1e-12);
      double mx = 0, my = 0;
      for (std::int64_t iy = 0; iy < s.ny; ++iy)
        for (std::int64_t ix = 0; ix < s.nx; ++ix) {
          mx += s.pixels[iy * s.nx + ix] * double(s.xstart + ix);
          my += s.pixels[iy * s.nx + ix] * double(s.ystart + iy);
        }
      EXPECT_NEAR(mx, psf.x(ispec, w), 0.3);
      EXPECT_NEAR(my, psf.y(ispec, w), 0.3);
    }
  // Off the fibre's rows: empty, as specter's xypix.
  EXPECT_EQ(psf.spot(0, 5000.0).nx, 0);
  EXPECT_EQ(psf.spot(0, 9000.0).ystart, psf.npix_y());
}

// Parameters by name: the r0 file's series are linear in lambda (LEGDEG 1), so at the ends of
// the domain a parameter is c0 - c1 and c0 + c1 of its coefficients.
TEST(SpecexPsf, ParametersByName) {
  const Psf& psf = r0();
  const PsfModel& m = psf.model();
  ASSERT_EQ(m.param_ncoeff, 2);
  const auto coeff = [&](int param, int ispec, int k) {
    return m.params[(static_cast<std::size_t>(param) * m.nspec + ispec) * m.param_ncoeff + k];
  };
  for (const int ispec : {0, 321}) {
    const int gh = kFirstGh + 2 * (m.ghdegy + 1) + 1;  // GH-2-1
    EXPECT_NEAR(psf.parameter("GHSIGX", ispec, m.param_lo),
                coeff(kGhSigX, ispec, 0) - coeff(kGhSigX, ispec, 1), 1e-14);
    EXPECT_NEAR(psf.parameter("GH-2-1", ispec, m.param_hi),
                coeff(gh, ispec, 0) + coeff(gh, ispec, 1), 1e-14);
  }
  EXPECT_GT(psf.parameter("GHSIGY", 10, 6500), 0.5);
  EXPECT_LT(psf.parameter("GHSIGY", 10, 6500), 2.0);
  EXPECT_THROW(psf.parameter("GH-7-0", 0, 6500), InvalidArgument);  // GHDEGX is 6
  EXPECT_THROW(psf.parameter("SIGMA", 0, 6500), InvalidArgument);
  EXPECT_THROW(psf.parameter("GHSIGX", 500, 6500), InvalidArgument);
}

TEST(SpecexPsf, RefusesFilesThatAreNotPsfs) {
  try {
    Psf::load(kData + "README.md");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("README.md"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("FITS"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Psf::load(kData + "no-such-file.fits"), InvalidArgument);
}

TEST(SpecexPlan, BundlesSubbundlesAndPadding) {
  const Psf& psf = r0();
  const auto w = wavelength_grid(6000, 6079.2, 0.8);
  ASSERT_EQ(w.size(), 100u);
  const PixelRange r = psf.xyrange(0, 10, w.front() - 30, w.back() + 30);
  std::vector<double> image(r.nx() * r.ny(), 0.0), ivar(image.size(), 1.0);
  Ex2dOptions o;
  o.bundlesize = 10;
  o.nsubbundles = 3;  // refused: 10 is not a multiple of 3
  const ImageInput in{image, ivar, r.ny(), r.nx(), r};
  EXPECT_THROW(ex2d_patches(psf, in, 0, 10, w, o), InvalidArgument);
  o.nsubbundles = 2;
  const auto plan = ex2d_patches(psf, in, 0, 10, w, o);
  ASSERT_EQ(plan.size(), 4u);  // 2 subbundles x 2 wavelength steps
  // specter's split_bundle(10, 2): cores 0-4 and 5-9, extracted 0-5 and 4-9.
  EXPECT_EQ(plan[0].speclo, 0);
  EXPECT_EQ(plan[0].nspec, 6);
  EXPECT_EQ(plan[0].keeplo, 0);
  EXPECT_EQ(plan[2].speclo, 4);
  EXPECT_EQ(plan[2].keeplo, 1);
  EXPECT_EQ(plan[2].nkeep, 5);
  const int ndiag = resolution_ndiag(psf, 0, 10, 0.8);
  EXPECT_EQ(ndiag, 5);  // docs: 5 for r0 at 0.8 A
  EXPECT_EQ(resolution_ndiag(psf, 0, 10, 2.0), 3);
  for (const auto& p : plan) {
    EXPECT_GE(p.nlo, ndiag);
    EXPECT_GE(p.nhi, ndiag);
    EXPECT_EQ(p.ncore, 50);
  }
}

// A noiseless frame: the extraction gives back R applied to the input spectra; with flat input
// spectra that is the input itself (R's rows sum to one). Not to rounding: each patch sees only
// its padded rows, so light of wavelengths beyond its padding leaks in at its edges (specter's
// divide and conquer does the same); that bias stays below 5e-4 of the flux, and the median bin
// is within 1e-6.
TEST(SpecexExtract, NoiselessFlatFrameGivesBackItsSpectra) {
  const Psf& psf = r0();
  const auto w = wavelength_grid(6000, 6079.2, 0.8);
  const auto wide = wavelength_grid(5960, 6120, 0.8);
  const int nspec = 10;
  std::vector<double> phot(nspec * wide.size());
  for (int i = 0; i < nspec; ++i)
    for (std::size_t j = 0; j < wide.size(); ++j) phot[i * wide.size() + j] = 100.0 + 10 * i;
  PixelRange r = psf.xyrange(0, nspec, wide.front(), wide.back());
  const auto image = project(psf, wide, phot, 0, r);
  const std::vector<double> ivar(image.size(), 1.0 / 9);
  Ex2dOptions o;
  o.bundlesize = 10;
  o.nsubbundles = 2;
  const auto res = ex2d(kRef, psf, ImageInput{image, ivar, r.ny(), r.nx(), r}, 0, nspec, w, o);
  const int nd = 2 * res.ndiag + 1;
  std::vector<double> errors;
  for (int i = 0; i < nspec; ++i)
    for (std::int64_t j = 0; j < res.nwave; ++j) {
      const double expected = (100.0 + 10 * i) / 0.8;  // photons per bin -> per Angstrom
      errors.push_back(std::abs(res.flux[i * res.nwave + j] / expected - 1));
      EXPECT_NEAR(res.flux[i * res.nwave + j], expected, 5e-4 * expected) << i << " " << j;
      EXPECT_GT(res.ivar[i * res.nwave + j], 0);
      // Each bin's resolution row sums to one where the whole row is stored.
      if (j >= res.ndiag && j + res.ndiag < res.nwave) {
        double row = 0;
        for (int k = 0; k < nd; ++k) {
          const std::int64_t col = j + res.ndiag - k;  // Rd[k, col] = R[col - ndiag + k, col]
          row += res.resolution[(i * nd + k) * res.nwave + col];
        }
        EXPECT_NEAR(row, 1.0, 1e-3) << i << " " << j;  // rows reach beyond ndiag a little
      }
    }
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  EXPECT_LT(errors[errors.size() / 2], 1e-6);
}

// With noise: chi2pix near 1 (the model reproduces the frame within its noise), the model image
// equals the frame's signal to noise, and masked pixels raise pixmask_fraction.
TEST(SpecexExtract, NoisyFrameHasChi2NearOneAndAModelWithinNoise) {
  const Psf& psf = r0();
  const auto w = wavelength_grid(6000, 6079.2, 0.8);
  const auto wide = wavelength_grid(5960, 6120, 0.8);
  const int nspec = 10;
  std::vector<double> phot(nspec * wide.size());
  std::mt19937_64 rng(3);
  for (auto& v : phot) v = 200 + 300 * double(rng() >> 11) * 0x1.0p-53;
  PixelRange r = psf.xyrange(0, nspec, wide.front(), wide.back());
  auto sim = simulate_image(psf, wide, phot, 0, r, 3.0, 7);
  sim.ivar[r.nx() * 40 + 30] = 0;  // one masked pixel
  Ex2dOptions o;
  o.bundlesize = 5;
  o.nsubbundles = 1;
  const auto res =
      ex2d(kRef, psf, ImageInput{sim.image, sim.ivar, r.ny(), r.nx(), r}, 0, nspec, w, o);
  std::vector<double> chi2 = res.chi2pix;
  std::sort(chi2.begin(), chi2.end());
  const double median = chi2[chi2.size() / 2];
  EXPECT_GT(median, 0.7);
  EXPECT_LT(median, 1.4);
  EXPECT_GT(*std::max_element(res.pixmask_fraction.begin(), res.pixmask_fraction.end()), 0.0);
  // Model against image inside the spectra's core: residuals of the order of the noise.
  double chi2sum = 0;
  std::int64_t count = 0;
  for (std::size_t k = 0; k < sim.image.size(); ++k)
    if (res.model[k] > 50 && sim.ivar[k] > 0) {
      const double d = sim.image[k] - res.model[k];
      chi2sum += d * d * sim.ivar[k];
      ++count;
    }
  ASSERT_GT(count, 1000);
  EXPECT_LT(chi2sum / count, 1.5);
}

TEST(SpecexExtract, AllMaskedPatchHasZeroIvar) {
  const Psf& psf = r0();
  const auto w = wavelength_grid(6000, 6039.2, 0.8);
  PixelRange r = psf.xyrange(0, 5, w.front() - 20, w.back() + 20);
  const std::vector<double> image(r.nx() * r.ny(), 10.0), ivar(image.size(), 0.0);
  Ex2dOptions o;
  o.bundlesize = 5;
  const auto res = ex2d(kRef, psf, ImageInput{image, ivar, r.ny(), r.nx(), r}, 0, 5, w, o);
  for (const double v : res.ivar) EXPECT_EQ(v, 0.0);
}

TEST(SpecexExtract, RefusesBadInputNamingTheArgument) {
  const Psf& psf = r0();
  const auto w = wavelength_grid(6000, 6039.2, 0.8);
  PixelRange r = psf.xyrange(0, 5, w.front() - 20, w.back() + 20);
  std::vector<double> image(r.nx() * r.ny(), 10.0), ivar(image.size(), 1.0);
  const ImageInput in{image, ivar, r.ny(), r.nx(), r};
  Ex2dOptions o;
  o.bundlesize = 5;
  auto message = [&](auto&& call) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 0, 7, w, o); }).find("nspec"), std::string::npos);
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 498, 5, w, o); }).find("specmin"), std::string::npos);
  const auto outside = wavelength_grid(5000, 5040, 0.8);
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 0, 5, outside, o); }).find("wavelengths"),
            std::string::npos);
  std::vector<double> reversed(w.rbegin(), w.rend());
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 0, 5, reversed, o); }).find("increasing"),
            std::string::npos);
  image[5] = std::nan("");
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 0, 5, w, o); }).find("image"), std::string::npos);
  image[5] = 1;
  ivar[7] = -1;
  EXPECT_NE(message([&] { ex2d(kRef, psf, in, 0, 5, w, o); }).find("imageivar"), std::string::npos);
  ivar[7] = 1;
  const ImageInput short_ivar{image, std::span<const double>(ivar).first(10), r.ny(), r.nx(), r};
  EXPECT_NE(message([&] { ex2d(kRef, psf, short_ivar, 0, 5, w, o); }).find("imageivar"),
            std::string::npos);
}

}  // namespace
