// The specex family's case for the harness (core/harness.hpp): a DESI-like frame simulated from
// a real PSF (default: the r-camera PSF of exposure 67784 in tests/data/specex), spectra of a
// continuum with emission lines, photon and read noise, cut out around the spectra, then
// extracted with ex2d as desispec does (bundles of 25, 5 subbundles, 50 wavelengths a patch).
// Settings: psf (a path), specmin, nspec, bundlesize, nsubbundles, wavesize, wmin, nwave, dw,
// ndecorr (0 or 1), read_noise, seed.
#include "case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/specex.hpp"

#ifndef SCIPROXY_SOURCE_DIR
#define SCIPROXY_SOURCE_DIR "."
#endif

namespace sciproxy::specex {

namespace {

// A production frame, for the extrapolation in the report: 500 fibres, r camera 5760-7620 A at
// 0.8 A, bundles of 25 in 5 subbundles, 50 wavelengths a patch.
constexpr double kFramePatches = 20.0 * 5 * 47;

std::string default_psf() {
  if (const char* env = std::getenv("SCIPROXY_SPECEX_PSF")) return env;
  return std::string(SCIPROXY_SOURCE_DIR) + "/tests/data/specex/psf-r0-00067784.fits";
}

// Photons per wavelength bin: a smooth continuum that differs between fibres, and emission lines
// at random places (sky and galaxy lines), deterministic for a seed.
std::vector<double> spectra(int nspec, std::int64_t nwave, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  auto uniform = [&] { return static_cast<double>(engine() >> 11) * 0x1.0p-53; };
  std::vector<double> phot(static_cast<std::size_t>(nspec * nwave));
  for (int i = 0; i < nspec; ++i) {
    const double level = 50 + 150 * uniform(), tilt = uniform() - 0.5;
    for (std::int64_t j = 0; j < nwave; ++j) {
      const double t = double(j) / double(std::max<std::int64_t>(nwave - 1, 1));
      phot[i * nwave + j] = level * (1 + tilt * (t - 0.5)) * (1 + 0.2 * std::sin(12 * t + i));
    }
    const std::int64_t nlines = std::max<std::int64_t>(1, nwave / 40);
    for (std::int64_t l = 0; l < nlines; ++l) {
      const double centre = uniform() * double(nwave), amplitude = 300 + 3000 * uniform();
      for (std::int64_t j = 0; j < nwave; ++j) {
        const double d = (double(j) - centre) / 1.5;
        if (std::abs(d) < 6) phot[i * nwave + j] += amplitude * std::exp(-0.5 * d * d);
      }
    }
  }
  return phot;
}

class Ex2dCase final : public Case {
 public:
  explicit Ex2dCase(const CaseSettings& s) {
    s.check_known({"psf", "specmin", "nspec", "bundlesize", "nsubbundles", "wavesize", "wmin",
                   "nwave", "dw", "ndecorr", "read_noise", "seed", "dtype"});
    require(s.get("dtype", "float64") == "float64", "dtype", "float64 (specex computes in double)",
            s.get("dtype", "float64"));
    psf_path_ = s.get("psf", default_psf());
    require(std::filesystem::exists(psf_path_), "psf",
            "the path of a DESI Gauss-Hermite PSF file (or set SCIPROXY_SPECEX_PSF)",
            fmt::format("\"{}\", which does not exist", psf_path_));
    psf_ = std::make_unique<Psf>(Psf::load(psf_path_));
    specmin_ = static_cast<int>(s.get_int("specmin", 0));
    nspec_ = static_cast<int>(s.get_int("nspec", 50));
    options_.bundlesize = static_cast<int>(s.get_int("bundlesize", 25));
    options_.nsubbundles = static_cast<int>(s.get_int("nsubbundles", 5));
    options_.wavesize = static_cast<int>(s.get_int("wavesize", 50));
    const auto ndecorr = s.get_int("ndecorr", 0);
    require(ndecorr == 0 || ndecorr == 1, "ndecorr", "0 (signal) or 1 (noise)",
            std::to_string(ndecorr));
    options_.ndecorr = ndecorr == 1;
    const double wmin = s.get_real("wmin", 5760.0), dw = s.get_real("dw", 0.8);
    const auto nwave = s.get_int("nwave", 250);
    require(nwave >= 2 && nwave <= 100000, "nwave", "2 to 100000", std::to_string(nwave));
    require(std::isfinite(dw) && dw > 0, "dw", "a positive step", fmt::format("{}", dw));
    wavelengths_ = wavelength_grid(wmin, wmin + double(nwave - 1) * dw, dw);
    wavelengths_.resize(static_cast<std::size_t>(nwave));
    seed_ = static_cast<std::uint64_t>(s.get_int("seed", 1));
    read_noise_ = s.get_real("read_noise", 3.0);
    require(specmin_ >= 0 && nspec_ >= 1 && specmin_ + nspec_ <= psf_->nspec(), "specmin, nspec",
            fmt::format("fibres within the PSF's {}", psf_->nspec()),
            fmt::format("{} + {}", specmin_, nspec_));

    // The cut-out: the spectra's pixels with room above and below for the padding patches read.
    PixelRange r =
        psf_->xyrange(specmin_, specmin_ + nspec_, wavelengths_.front(), wavelengths_.back());
    r.ymin = std::max<std::int64_t>(0, r.ymin - 60);
    r.ymax = std::min<std::int64_t>(psf_->npix_y(), r.ymax + 60);
    r.xmin = std::max<std::int64_t>(0, r.xmin - 10);
    r.xmax = std::min<std::int64_t>(psf_->npix_x(), r.xmax + 10);
    // Photons over a wider wavelength range than extracted, so that the edges see light too.
    const double margin = 30.0;
    std::vector<double> wide =
        wavelength_grid(std::max(psf_->wmin(), wavelengths_.front() - margin),
                        std::min(psf_->wmax(), wavelengths_.back() + margin), dw);
    const auto phot = spectra(nspec_, static_cast<std::int64_t>(wide.size()), seed_);
    image_ = simulate_image(*psf_, wide, phot, specmin_, r, read_noise_, seed_);
    patches_ = ex2d_patches(*psf_, input(), specmin_, nspec_, wavelengths_, options_);
  }

  std::string kernel() const override { return "ex2d"; }
  std::string label() const override {
    return fmt::format("{} spectra x {} wavelengths ({:.1f}-{:.1f} A), {} patches, {} mode", nspec_,
                       wavelengths_.size(), wavelengths_.front(), wavelengths_.back(),
                       patches_.size(), options_.ndecorr ? "noise" : "signal");
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("psf", std::filesystem::path(psf_path_).filename().string());
    p.set("specmin", specmin_);
    p.set("nspec", nspec_);
    p.set("nwave", static_cast<long long>(wavelengths_.size()));
    p.set("bundlesize", options_.bundlesize);
    p.set("nsubbundles", options_.nsubbundles);
    p.set("wavesize", options_.wavesize);
    p.set("patches", static_cast<long long>(patches_.size()));
    p.set("ndecorr", options_.ndecorr);
    p.set("image", fmt::format("{} x {}", image_.range.ny(), image_.range.nx()));
    return p;
  }
  WorkModel work() const override { return ex2d_work(patches_, psf_->model(), options_.ndecorr); }

  double run(const Device& device, Timers* timers) override {
    result_ = ex2d(device, *psf_, input(), specmin_, nspec_, wavelengths_, options_, timers);
    return 0;
  }

  std::vector<CaseOutput> outputs() const override {
    return {{"flux", std::span<const double>(result_.flux)},
            {"ivar", std::span<const double>(result_.ivar)},
            {"resolution", std::span<const double>(result_.resolution)}};
  }
  Tolerance tolerance(const std::string&) const override { return ex2d_tolerance(); }

  // The bundles split across the ranks, the whole result gathered on rank 0 (the others hold
  // its sizes only): rank 0 verifies it against the reference of one process.
  void distribute(const Communicator& comm) override {
    options_.comm = comm;
    options_.result_layout = ResultLayout::root;
  }

  // Patches per second and what they make of a production frame.
  Parameters details(const KernelReport& report) const override {
    Parameters d;
    if (report.seconds > 0) {
      const double rate = double(patches_.size()) / report.seconds;
      const nlohmann::json frame = {{"patches_per_second", rate},
                                    {"frame_patches", kFramePatches},
                                    {"frame_seconds_extrapolated", kFramePatches / rate},
                                    {"frames_per_hour", 3600.0 * rate / kFramePatches},
                                    {"retried_patches", result_.retried_patches}};
      d.set_json("frame", frame.dump());
    }
    return d;
  }

 private:
  ImageInput input() const {
    return {image_.image, image_.ivar, image_.range.ny(), image_.range.nx(), image_.range};
  }

  std::string psf_path_;
  std::unique_ptr<Psf> psf_;
  int specmin_ = 0, nspec_ = 0;
  Ex2dOptions options_;
  std::vector<double> wavelengths_;
  std::uint64_t seed_ = 1;
  double read_noise_ = 3;
  SimulatedImage image_;
  std::vector<PatchPlan> patches_;
  Ex2dResult result_;
};

std::unique_ptr<Case> make_ex2d(const CaseSettings& s) {
  return std::make_unique<Ex2dCase>(s);
}

// What users extract: two bundles in production shape, both decorrelation modes; and the sweep
// across the sizes that matter: the number of spectra per patch (subbundles), the patch's
// wavelength extent, and the coarse grid where ndiag drops.
std::vector<CaseSettings> ex2d_sweep() {
  std::vector<CaseSettings> sweep;
  for (const char* nsub : {"5", "1"})
    for (const char* wavesize : {"25", "50", "100"})
      sweep.push_back(CaseSettings{
          {{"nsubbundles", nsub}, {"wavesize", wavesize}, {"nspec", "50"}, {"nwave", "300"}}});
  sweep.push_back(CaseSettings{{{"dw", "2.0"}, {"nwave", "120"}}});
  sweep.push_back(CaseSettings{{{"ndecorr", "1"}}});
  return sweep;
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back({"ex2d",
                      "specex",
                      "spectroperfectionism extraction of a simulated DESI frame (specter's ex2d)",
                      make_ex2d,
                      {CaseSettings{}},
                      ex2d_sweep()});
  registry.back().tolerance = [](const CaseSettings&, const std::string&) {
    return ex2d_tolerance();
  };
}

}  // namespace sciproxy::specex
