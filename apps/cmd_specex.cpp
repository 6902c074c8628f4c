// `sciproxy spex`: gpu_specter's spex (extract spectra from a preprocessed DESI CCD image with
// a PSF, write the frame), and `sciproxy simulate`: a preprocessed image made from a PSF and a
// simple spectrum model, for spex to extract. Both over the library's specex files
// (src/specex/files.cpp); equations in include/sciproxy/specex.hpp.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::app {

namespace {

namespace sx = sciproxy::specex;

// The library's argument names as the options that set them.
const OptionNames kNames{{{"image", "-i/--input"},
                          {"psf", "-p/--psf"},
                          {"frame", "-o/--output"},
                          {"model", "-m/--model"},
                          {"specmin", "-s/--specmin"},
                          {"nspec", "-n/--nspec"},
                          {"bundlesize", "--bundlesize"},
                          {"nsubbundles", "--nsubbundles"},
                          {"wavesize", "--nwavestep"},
                          {"psferr", "--psferr"},
                          {"pixpad_frac", "--pixpad-frac"},
                          {"wavepad_frac", "--wavepad-frac"},
                          {"wavelengths", "-w/--wavelength"},
                          {"wavelength", "-w/--wavelength"},
                          {"wmin", "-w/--wavelength"},
                          {"wmax", "-w/--wavelength"},
                          {"dw", "-w/--wavelength"},
                          {"read_noise", "--read-noise"}},
                         {}};

// "A,B,C" as n numbers (UsageError naming the option otherwise).
std::vector<double> parse_numbers(const std::string& text, std::size_t n, std::string_view option,
                                  std::string_view form) {
  std::vector<double> v;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (item.empty() || used != item.size() || !std::isfinite(x))
      throw UsageError(fmt::format("{}: expected {}, got \"{}\"", option, form, text));
    v.push_back(x);
  }
  if (v.size() != n)
    throw UsageError(fmt::format("{}: expected {}, got \"{}\"", option, form, text));
  return v;
}

std::vector<double> parse_grid(const std::string& text) {
  const auto w = parse_numbers(text, 3, "-w/--wavelength", "WMIN,WMAX,DW (Angstroms)");
  try {
    return sx::wavelength_grid(w[0], w[1], w[2]);
  } catch (const InvalidArgument& e) {
    throw UsageError(kNames.rewrite(e.what()));
  }
}

// ---- spex ----

struct SpexOptions {
  std::string image, psf, frame, model;
  std::string wavelength;
  int specmin = 0, nspec = 500;
  int bundlesize = 25, nsubbundles = 5, nwavestep = 50;
  double psferr = -1;
  CLI::Option* psferr_option = nullptr;
  double pixpad_frac = 0.8, wavepad_frac = 0.2;
  double regularize = 0;
  bool ndecorr = false;
  std::string device = "auto";
  int threads = 0;
  std::string json_path;
};

struct Progress {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool drawn = false;
};

void on_progress(void* context, int done, int total) {
  auto* p = static_cast<Progress*>(context);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
  fmt::print("\rspex: bundle {}/{} ({:.0f}%), {:.1f} s", done, total,
             total > 0 ? 100.0 * done / total : 100.0, s);
  std::fflush(stdout);
  p->drawn = true;
}

int run_spex(const SpexOptions& opt) {
  const std::vector<double> wave = parse_grid(opt.wavelength);
  check_threads(opt.threads);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  if (opt.nspec < 1)
    throw UsageError(fmt::format("-n/--nspec: expected at least 1 spectrum, got {}", opt.nspec));
  if (opt.specmin < 0)
    throw UsageError(fmt::format("-s/--specmin: expected a fibre >= 0, got {}", opt.specmin));
  if (opt.bundlesize < 1)
    throw UsageError(fmt::format("--bundlesize: expected at least 1, got {}", opt.bundlesize));
  if (opt.nsubbundles < 1 || opt.bundlesize % opt.nsubbundles != 0)
    throw UsageError(fmt::format("--nsubbundles: expected a divisor of --bundlesize ({}), got {}",
                                 opt.bundlesize, opt.nsubbundles));
  // Checked here too, before the image is read: the library says the same after.
  if (opt.nspec % opt.bundlesize != 0)
    throw UsageError(fmt::format("-n/--nspec: expected a multiple of --bundlesize ({}), got {}",
                                 opt.bundlesize, opt.nspec));
  if (opt.nwavestep < 1)
    throw UsageError(fmt::format("--nwavestep: expected at least 1, got {}", opt.nwavestep));
  // Padding beyond 10 spot sizes is refused (far larger values overflow the patch plan).
  if (!(opt.pixpad_frac >= 0 && opt.pixpad_frac <= 10))
    throw UsageError(
        fmt::format("--pixpad-frac: expected a number from 0 to 10, got {}", opt.pixpad_frac));
  if (!(opt.wavepad_frac >= 0 && opt.wavepad_frac <= 10))
    throw UsageError(
        fmt::format("--wavepad-frac: expected a number from 0 to 10, got {}", opt.wavepad_frac));
  if (!(opt.regularize >= 0) || !std::isfinite(opt.regularize))
    throw UsageError(fmt::format("--regularize: expected a number >= 0, got {}", opt.regularize));
  if (opt.psferr_option->count() && !(opt.psferr > 0))
    throw UsageError(fmt::format("--psferr: expected a number > 0, got {}", opt.psferr));
  const Device device = select_device_option(opt.device);
  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);

  sx::Ex2dOptions ex;
  ex.bundlesize = opt.bundlesize;
  ex.nsubbundles = opt.nsubbundles;
  ex.wavesize = opt.nwavestep;
  ex.pixpad_frac = opt.pixpad_frac;
  ex.wavepad_frac = opt.wavepad_frac;
  ex.regularize = opt.regularize;
  ex.ndecorr = opt.ndecorr;
  if (opt.psferr_option->count()) ex.psferr = opt.psferr;
  ex.full_output = true;  // the frame's MASK and CHI2PIX need it
  ex.nparallel = opt.threads;
  // Under mpirun the bundles are split across the ranks (gpu_specter's --mpi); rank 0 gathers
  // the frame and writes it.
  const Communicator& comm = ranks();
  ex.comm = comm;
  ex.result_layout = sx::ResultLayout::root;
  Progress progress;
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  if (terminal) {
    ex.progress = on_progress;
    ex.progress_context = &progress;
  }

  fmt::print(
      "sciproxy spex: {} spectra from {} at {} wavelengths {:.2f}-{:.2f} A (step {:g} A), "
      "bundles of {} in {} subbundle{}, {} wavelengths a patch, device {}{}{}{}\n",
      opt.nspec, opt.specmin, wave.size(), wave.front(), wave.back(),
      wave.size() > 1 ? wave[1] - wave[0] : 0.0, opt.bundlesize, opt.nsubbundles,
      opt.nsubbundles == 1 ? "" : "s", opt.nwavestep, device.name(),
      device.automatic ? " (chosen by auto)" : "",
      device.backend == Backend::cuda
          ? ""
          : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"),
      comm.distributed()
          ? fmt::format(" on {} MPI ranks ({} bundles split across them; progress: rank 0's)",
                        comm.size(), opt.nspec / opt.bundlesize)
          : "");
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  std::fflush(stdout);

  Timers timers;
  const auto t0 = std::chrono::steady_clock::now();
  sx::Ex2dResult r;
  try {
    r = sx::extract_frame(device, opt.image, opt.psf, opt.frame, opt.model, wave, opt.specmin,
                          opt.nspec, ex, &timers);
  } catch (...) {
    if (progress.drawn) fmt::print("\n");
    throw;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress.drawn) fmt::print("\n");

  auto total_of = [&](std::string_view path) {
    const Timers::Stat* s = timers.find(path);
    return s ? s->total : 0.0;
  };
  const double t_read = total_of("read image") + total_of("read psf");
  const double t_write = total_of("write frame");
  double t_extract = total_of("ex2d");
  if (t_extract <= 0) t_extract = std::max(wall - t_read - t_write, 0.0);
  const double patches_per_s = t_extract > 0 ? double(r.npatches) / t_extract : 0.0;
  const double frames_per_hour = wall > 0 ? 3600.0 / wall : 0.0;
  // A production frame (one camera: 500 spectra x 2326 wavelengths, r at 0.8 A) at this run's
  // extraction rate per flux bin, plus this run's I/O (the image read is the same size).
  const double production_s =
      t_extract * (500.0 * 2326.0) / (double(opt.nspec) * double(wave.size())) + t_read + t_write;
  const double production_frames_per_hour = production_s > 0 ? 3600.0 / production_s : 0.0;

  fmt::print("Wrote {} ({} spectra x {} wavelengths, resolution {} diagonals){}\n", opt.frame,
             r.nspec, r.nwave, 2 * r.ndiag + 1,
             opt.model.empty() ? "" : fmt::format(" and the model image {}", opt.model));
  std::cout << timers.table();
  fmt::print(
      "Extraction: {} patches in {:.3f} s ({:.1f} patches/s){}; read {:.3f} s, write {:.3f} s, "
      "total {:.3f} s\n",
      r.npatches, t_extract, patches_per_s,
      r.retried_patches ? fmt::format(", {} retried with regularize 1e-4", r.retried_patches) : "",
      t_read, t_write, wall);
  fmt::print(
      "Rate: {:.1f} frames/hour for this frame ({} spectra x {} wavelengths); about {:.1f} "
      "frames/hour for a production frame (500 x 2326, this run's rate per flux bin plus its "
      "I/O)\n",
      frames_per_hour, opt.nspec, wave.size(), production_frames_per_hour);

  if (!opt.json_path.empty() && comm.rank() == 0) {
    nlohmann::json j{
        {"command", "spex"},
        {"image", opt.image},
        {"psf", opt.psf},
        {"frame", opt.frame},
        {"model", opt.model},
        {"specmin", opt.specmin},
        {"nspec", opt.nspec},
        {"wavelengths",
         {{"wmin", wave.front()},
          {"wmax", wave.back()},
          {"dw", wave.size() > 1 ? wave[1] - wave[0] : 0.0},
          {"nwave", wave.size()}}},
        {"options",
         {{"bundlesize", opt.bundlesize},
          {"nsubbundles", opt.nsubbundles},
          {"nwavestep", opt.nwavestep},
          {"psferr", ex.psferr ? nlohmann::json(*ex.psferr) : nlohmann::json(nullptr)},
          {"pixpad_frac", opt.pixpad_frac},
          {"wavepad_frac", opt.wavepad_frac},
          {"regularize", opt.regularize},
          {"ndecorr", opt.ndecorr}}},
        {"device", device.name()},
        {"threads", threads},
        {"ranks", comm.size()},
        {"ndiag", r.ndiag},
        {"npatches", r.npatches},
        {"retried_patches", r.retried_patches},
        {"seconds",
         {{"total", wall}, {"read", t_read}, {"extract", t_extract}, {"write", t_write}}},
        {"patches_per_s", patches_per_s},
        {"frames_per_hour", frames_per_hour},
        {"frames_per_hour_production_estimate", production_frames_per_hour},
        {"timers", nlohmann::json::parse(timers.json())},
        {"environment", environment_record(threads)}};
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  return 0;
}

// ---- simulate ----

struct SimulateOptions {
  std::string psf, output, wavelength, xyrange;
  int specmin = 0, nspec = 0;  // 0: every fibre from specmin
  double continuum = 100, line_flux = 2000, line_sigma = 1.0;
  int lines = 5;
  double read_noise = 3;
  std::uint64_t seed = 0;
  bool whole_ccd = false;
  std::string camera = "r0";
  int threads = 0;
};

// A uniform number in [0, 1) from the generator's bits (the standard fixes mt19937_64's output,
// not the distributions'): the same spectra for a seed on every platform.
double uniform(std::mt19937_64& g) {
  return double(g() >> 11) * 0x1.0p-53;
}

// The spectra, photons per wavelength bin (nspec, nwave): a continuum per fibre, C (0.5 + u_i),
// plus emission lines shared by every fibre (as sky lines are) at wavelengths drawn uniformly in
// the grid, each of flux F (0.5 + u_l) spread as a Gaussian of sigma S Angstroms over the bins.
std::vector<double> model_spectra(const SimulateOptions& opt, int nspec,
                                  const std::vector<double>& wave) {
  std::mt19937_64 g(opt.seed);
  const std::size_t nwave = wave.size();
  const double dw = nwave > 1 ? wave[1] - wave[0] : 1.0;
  std::vector<double> line_w(opt.lines), line_f(opt.lines);
  for (int l = 0; l < opt.lines; ++l) {
    line_w[l] = wave.front() + uniform(g) * (wave.back() - wave.front());
    line_f[l] = opt.line_flux * (0.5 + uniform(g));
  }
  std::vector<double> lines(nwave, 0.0);
  for (int l = 0; l < opt.lines; ++l)
    for (std::size_t j = 0; j < nwave; ++j) {
      const double u = (wave[j] - line_w[l]) / opt.line_sigma;
      lines[j] += line_f[l] * dw * std::exp(-0.5 * u * u) / (opt.line_sigma * std::sqrt(2 * M_PI));
    }
  std::vector<double> phot(static_cast<std::size_t>(nspec) * nwave);
  for (int i = 0; i < nspec; ++i) {
    const double c = opt.continuum * (0.5 + uniform(g));
    for (std::size_t j = 0; j < nwave; ++j) phot[i * nwave + j] = c + lines[j];
  }
  return phot;
}

int run_simulate(const SimulateOptions& opt) {
  const std::vector<double> wave = parse_grid(opt.wavelength);
  check_threads(opt.threads);
  if (!(opt.read_noise > 0))
    throw UsageError(fmt::format("--read-noise: expected a number > 0, got {}", opt.read_noise));
  if (!(opt.continuum >= 0))
    throw UsageError(fmt::format("--continuum: expected a number >= 0, got {}", opt.continuum));
  if (!(opt.line_flux >= 0))
    throw UsageError(fmt::format("--line-flux: expected a number >= 0, got {}", opt.line_flux));
  if (!(opt.line_sigma > 0))
    throw UsageError(fmt::format("--line-sigma: expected a number > 0, got {}", opt.line_sigma));
  if (opt.lines < 0)
    throw UsageError(fmt::format("--lines: expected a count >= 0, got {}", opt.lines));
  if (!opt.xyrange.empty() && opt.whole_ccd)
    throw UsageError("--xyrange: not with --whole-ccd (one or the other)");
  if (opt.specmin < 0)
    throw UsageError(fmt::format("-s/--specmin: expected a fibre >= 0, got {}", opt.specmin));

  const sx::Psf psf = sx::Psf::load(opt.psf);
  if (opt.specmin >= psf.nspec())
    throw UsageError(fmt::format("-s/--specmin: expected a fibre of the PSF (0 to {}), got {}",
                                 psf.nspec() - 1, opt.specmin));
  const int nspec = opt.nspec > 0 ? opt.nspec : psf.nspec() - opt.specmin;
  if (opt.nspec < 0 || opt.specmin + nspec > psf.nspec())
    throw UsageError(fmt::format(
        "-n/--nspec: expected 1 to {} spectra (the PSF has {} fibres, from -s {}), got {}",
        psf.nspec() - opt.specmin, psf.nspec(), opt.specmin, opt.nspec));

  const sx::PixelRange ccd{0, psf.npix_x(), 0, psf.npix_y()};
  sx::PixelRange range = ccd;
  std::string where = "the whole CCD";
  if (!opt.xyrange.empty()) {
    const auto r = parse_numbers(opt.xyrange, 4, "--xyrange", "XMIN,XMAX,YMIN,YMAX (pixels)");
    range = {std::int64_t(r[0]), std::int64_t(r[1]), std::int64_t(r[2]), std::int64_t(r[3])};
    if (range.xmin < 0 || range.ymin < 0 || range.xmax > ccd.xmax || range.ymax > ccd.ymax ||
        range.nx() < 1 || range.ny() < 1 || r[0] != std::floor(r[0]) || r[1] != std::floor(r[1]) ||
        r[2] != std::floor(r[2]) || r[3] != std::floor(r[3]))
      throw UsageError(fmt::format(
          "--xyrange: expected whole pixels with 0 <= XMIN < XMAX <= {} and 0 <= YMIN < YMAX <= "
          "{}, got \"{}\"",
          ccd.xmax, ccd.ymax, opt.xyrange));
    where = fmt::format("columns {}-{}, rows {}-{}", range.xmin, range.xmax - 1, range.ymin,
                        range.ymax - 1);
  } else if (!opt.whole_ccd) {
    // The pixels the spectra fall on, with a margin of two spot sizes.
    range = psf.xyrange(opt.specmin, opt.specmin + nspec, wave.front(), wave.back());
    const auto& m = psf.model();
    range.xmin = std::max<std::int64_t>(range.xmin - 2 * m.hsizex, 0);
    range.xmax = std::min<std::int64_t>(range.xmax + 2 * m.hsizex, ccd.xmax);
    range.ymin = std::max<std::int64_t>(range.ymin - 2 * m.hsizey, 0);
    range.ymax = std::min<std::int64_t>(range.ymax + 2 * m.hsizey, ccd.ymax);
    if (range.nx() < 1 || range.ny() < 1)
      throw UsageError(
          fmt::format("-w/--wavelength: the spectra fall on no pixel of the CCD ({}-{} A)",
                      wave.front(), wave.back()));
    where = fmt::format("columns {}-{}, rows {}-{} (the spectra's pixels; the rest has ivar 0)",
                        range.xmin, range.xmax - 1, range.ymin, range.ymax - 1);
  }
  fmt::print(
      "sciproxy simulate: {} spectra from {} at {} wavelengths {:.2f}-{:.2f} A; continuum {:g}, "
      "{} line{} of {:g} (sigma {:g} A) photons; read noise {:g} e-, seed {}; {}\n",
      nspec, opt.specmin, wave.size(), wave.front(), wave.back(), opt.continuum, opt.lines,
      opt.lines == 1 ? "" : "s", opt.line_flux, opt.line_sigma, opt.read_noise, opt.seed, where);
  std::fflush(stdout);

  const std::vector<double> phot = model_spectra(opt, nspec, wave);
  const auto t0 = std::chrono::steady_clock::now();
  sx::SimulatedImage sim = sx::simulate_image(psf, wave, phot, opt.specmin, range, opt.read_noise,
                                              opt.seed, opt.threads);
  const double t_sim = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The file holds the whole CCD, as a preprocessed image does: outside the simulated pixels the
  // image is 0, ivar 0 and the mask ccdmask BAD (bit 0).
  if (sim.range.xmin != 0 || sim.range.ymin != 0 || sim.range.nx() != ccd.nx() ||
      sim.range.ny() != ccd.ny()) {
    sx::SimulatedImage full;
    full.range = ccd;
    full.read_noise = sim.read_noise;
    const auto n = static_cast<std::size_t>(ccd.nx() * ccd.ny());
    full.image.assign(n, 0.0);
    full.ivar.assign(n, 0.0);
    full.mask.assign(n, 1);
    for (std::int64_t y = 0; y < sim.range.ny(); ++y)
      for (std::int64_t x = 0; x < sim.range.nx(); ++x) {
        const auto from = static_cast<std::size_t>(y * sim.range.nx() + x);
        const auto to =
            static_cast<std::size_t>((y + sim.range.ymin) * ccd.nx() + x + sim.range.xmin);
        full.image[to] = sim.image[from];
        full.ivar[to] = sim.ivar[from];
        full.mask[to] = sim.mask.empty() ? 0 : sim.mask[from];
      }
    sim = std::move(full);
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (ranks().rank() == 0) sx::write_preproc_image(opt.output, sim, opt.camera);  // once

  const double t_write =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  fmt::print("Wrote {} ({} x {} pixels, camera {}); simulated in {:.3f} s, written in {:.3f} s\n",
             opt.output, ccd.ny(), ccd.nx(), opt.camera, t_sim, t_write);
  return 0;
}

}  // namespace

Command add_spex_command(CLI::App& root) {
  auto opt = std::make_shared<SpexOptions>();
  CLI::App* sub = root.add_subcommand(
      "spex",
      "Extract spectra from a preprocessed DESI CCD image with its PSF (gpu_specter's spex, "
      "specter's ex2d) and write the frame");
  sub->add_option("-i,--input", opt->image, "Preprocessed image (FITS: IMAGE, IVAR, MASK)")
      ->required()
      ->type_name("IMAGE");
  sub->add_option("-p,--psf", opt->psf, "PSF (FITS, Gauss-Hermite)")->required()->type_name("PSF");
  sub->add_option("-o,--output", opt->frame, "Frame to write (FITS)")
      ->required()
      ->type_name("FRAME")
      ->check(output_file());
  sub->add_option("-m,--model", opt->model, "Model image to write (FITS)")
      ->type_name("MODEL")
      ->check(output_file());
  sub->add_option("-w,--wavelength", opt->wavelength,
                  "Wavelength grid WMIN,WMAX,DW in Angstroms (numpy's arange(WMIN, WMAX + DW/2, "
                  "DW))")
      ->required()
      ->type_name("WMIN,WMAX,DW");
  sub->add_option("-s,--specmin", opt->specmin, "First spectrum")->capture_default_str();
  sub->add_option("-n,--nspec", opt->nspec, "Number of spectra")->capture_default_str();
  sub->add_option("--bundlesize", opt->bundlesize, "Spectra per bundle")->capture_default_str();
  sub->add_option("--nsubbundles", opt->nsubbundles, "Subbundles per bundle")
      ->capture_default_str();
  sub->add_option("--nwavestep", opt->nwavestep, "Core wavelength bins per patch")
      ->capture_default_str();
  opt->psferr_option = sub->add_option("--psferr", opt->psferr,
                                       "PSF error for chi2pix (default: the PSF's PSFERR, "
                                       "else 0.01)")
                           ->type_name("X");
  sub->add_option("--pixpad-frac", opt->pixpad_frac, "Pixel padding, a fraction of a spot")
      ->capture_default_str();
  sub->add_option("--wavepad-frac", opt->wavepad_frac, "Wavelength padding, a fraction of a spot")
      ->capture_default_str();
  sub->add_option("--regularize", opt->regularize, "Regularisation added to iCov's diagonal")
      ->capture_default_str();
  sub->add_flag("--decorrelate-noise", opt->ndecorr,
                "Noise decorrelation (Q = iCov^1/2) instead of specter's default signal mode");
  sub->add_option("--device", opt->device, "auto, reference, cpu, cuda or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--json", opt->json_path, "Write the run's sizes, times and rates to FILE")
      ->type_name("FILE")
      ->check(output_file());
  sub->footer(
      "The frame holds FLUX (electron/Angstrom), IVAR, MASK (desispec's SOMEBADPIX, ALLBADPIX, "
      "BAD2DFIT), WAVELENGTH, RESOLUTION, CHI2PIX and the image's FIBERMAP (when it has one). "
      "Files are written whole or not at all.");
  return {sub, [opt] { return with_option_names(kNames, [&] { return run_spex(*opt); }); }};
}

Command add_simulate_command(CLI::App& root) {
  auto opt = std::make_shared<SimulateOptions>();
  CLI::App* sub = root.add_subcommand(
      "simulate",
      "Simulate a preprocessed DESI CCD image from a PSF and a simple spectrum model (for spex)");
  sub->add_option("-p,--psf", opt->psf, "PSF (FITS, Gauss-Hermite)")->required()->type_name("PSF");
  sub->add_option("-o,--output", opt->output, "Preprocessed image to write (FITS)")
      ->required()
      ->type_name("IMAGE")
      ->check(output_file());
  sub->add_option("-w,--wavelength", opt->wavelength,
                  "Wavelength grid WMIN,WMAX,DW in Angstroms of the simulated spectra")
      ->required()
      ->type_name("WMIN,WMAX,DW");
  sub->add_option("-s,--specmin", opt->specmin, "First spectrum")->capture_default_str();
  sub->add_option("-n,--nspec", opt->nspec, "Number of spectra (default: every fibre from -s)");
  sub->add_option("--continuum", opt->continuum,
                  "Continuum, photons per bin: fibre i gets C (0.5 + u_i), u_i uniform in [0, 1)")
      ->capture_default_str();
  sub->add_option("--lines", opt->lines,
                  "Emission lines shared by every fibre, at wavelengths uniform in the grid")
      ->capture_default_str();
  sub->add_option("--line-flux", opt->line_flux,
                  "Photons of a line: F (0.5 + u_l), u_l uniform in [0, 1)")
      ->capture_default_str();
  sub->add_option("--line-sigma", opt->line_sigma, "Gaussian sigma of a line, Angstroms")
      ->capture_default_str();
  sub->add_option("--read-noise", opt->read_noise, "Read noise, electrons")->capture_default_str();
  sub->add_option("--seed", opt->seed, "Seed of the spectra and of the noise")
      ->capture_default_str();
  CLI::Option* xy = sub->add_option("--xyrange", opt->xyrange,
                                    "Simulate the pixels XMIN <= x < XMAX, YMIN <= y < YMAX only "
                                    "(default: those the spectra fall on)")
                        ->type_name("XMIN,XMAX,YMIN,YMAX");
  sub->add_flag("--whole-ccd", opt->whole_ccd, "Simulate every pixel (noise everywhere)")
      ->excludes(xy);
  sub->add_option("--camera", opt->camera, "CAMERA header card")->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads; 0: all")->type_name("N");
  sub->footer(
      "image = Poisson(A phot) + N(0, read_noise^2), ivar = 1 / (max(image, 0) + read_noise^2), "
      "deterministic for a seed. The file covers the whole CCD (IMAGE, IVAR, MASK); pixels "
      "outside the simulated ones are 0 with ivar 0 and mask 1.");
  return {sub, [opt] { return with_option_names(kNames, [&] { return run_simulate(*opt); }); }};
}

}  // namespace sciproxy::app
