// C ABI of the specex family (include/sciproxy/c/specex.h): a PSF handle, ex2d into the
// caller's arrays and extract_frame over files, as extern "C" wrappers that never throw
// (guarded.hpp).
#include "sciproxy/specex.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"

// The handle is the library's Psf (a shared pointer to the immutable model).
struct sciproxy_specex_psf {
  sciproxy::specex::Psf psf;
};

namespace {

using sciproxy::require;
using sciproxy::capi::guarded;
using sciproxy::capi::require_pointer;
namespace sx = sciproxy::specex;

sciproxy_specex_options read(const sciproxy_specex_options* o) {
  return sciproxy::capi::read_options(o, sciproxy_specex_options_default,
                                      "sciproxy_specex_options");
}

sx::Ex2dOptions options_of(const sciproxy_specex_options& c) {
  require(std::isfinite(c.regularize) && c.regularize >= 0, "regularize", "a number >= 0",
          fmt::format("{}", c.regularize));
  // Padding beyond 10 spot sizes is refused here: far larger values overflow the patch plan.
  require(std::isfinite(c.pixpad_frac) && c.pixpad_frac >= 0 && c.pixpad_frac <= 10, "pixpad_frac",
          "a number from 0 to 10", fmt::format("{}", c.pixpad_frac));
  require(std::isfinite(c.wavepad_frac) && c.wavepad_frac >= 0 && c.wavepad_frac <= 10,
          "wavepad_frac", "a number from 0 to 10", fmt::format("{}", c.wavepad_frac));
  require(!std::isnan(c.psferr) && std::isfinite(c.psferr), "psferr", "a number (< 0: the PSF's)",
          fmt::format("{}", c.psferr));
  sx::Ex2dOptions o;
  o.bundlesize = c.bundlesize;
  o.nsubbundles = c.nsubbundles;
  o.wavesize = c.wavesize;
  o.regularize = c.regularize;
  o.ndecorr = c.ndecorr != 0;
  o.pixpad_frac = c.pixpad_frac;
  o.wavepad_frac = c.wavepad_frac;
  if (c.psferr >= 0) o.psferr = c.psferr;
  o.full_output = c.full_output != 0;
  o.nparallel = c.nparallel > 0 ? c.nparallel : 0;
  require(c.result_layout == 0 || c.result_layout == 1, "options.result_layout",
          "0 (every rank) or 1 (rank 0)", std::to_string(c.result_layout));
  o.result_layout = static_cast<sx::ResultLayout>(c.result_layout);
  return o;
}

// The options' communicator: made first, so that every later error is every rank's.
sciproxy::Communicator comm_of(const sciproxy_specex_options& c) {
  return sciproxy::Communicator::from_handle(c.comm, "options.comm");
}

const sx::Psf& psf_of(const sciproxy_specex_psf* psf) {
  require_pointer(psf, "psf");
  return psf->psf;
}

// The C input as the library's image and wavelengths (spans over the caller's arrays).
struct Input {
  const sx::Psf* psf = nullptr;
  sx::ImageInput image;
  std::span<const double> wavelengths;
  int specmin = 0, nspec = 0;
};

Input input_of(const sciproxy_specex_input* c) {
  require_pointer(c, "input");
  Input in;
  in.psf = &psf_of(c->psf);
  require(c->ny >= 1 && c->nx >= 1, "ny, nx", "an image of at least one pixel",
          fmt::format("{} x {}", c->ny, c->nx));
  const auto npix = sciproxy::capi::checked_product(c->ny, c->nx, "ny x nx");
  require_pointer(c->image, "image");
  require_pointer(c->ivar, "ivar");
  in.image.image = {c->image, static_cast<std::size_t>(npix)};
  in.image.ivar = {c->ivar, static_cast<std::size_t>(npix)};
  in.image.ny = c->ny;
  in.image.nx = c->nx;
  if (c->has_range) in.image.range = sx::PixelRange{c->xmin, c->xmax, c->ymin, c->ymax};
  require(c->nwave >= 1, "nwave", "at least 1 wavelength", std::to_string(c->nwave));
  require(c->nspec >= 1, "nspec", "at least 1 spectrum", std::to_string(c->nspec));
  // The outputs hold nspec x nwave values: a count that overflows is refused here.
  (void)sciproxy::capi::checked_product(c->nspec, c->nwave, "nspec x nwave");
  require_pointer(c->wavelengths, "wavelengths");
  in.wavelengths = {c->wavelengths, static_cast<std::size_t>(c->nwave)};
  in.specmin = c->specmin;
  in.nspec = c->nspec;
  return in;
}

}  // namespace

extern "C" {

sciproxy_status sciproxy_specex_psf_load(const char* path, sciproxy_specex_psf** psf) {
  if (psf) *psf = nullptr;
  return guarded([&] {
    require_pointer(psf, "psf");
    require_pointer(path, "path");
    auto loaded = sx::Psf::load(path);
    *psf = new sciproxy_specex_psf{std::move(loaded)};
  });
}

void sciproxy_specex_psf_free(sciproxy_specex_psf* psf) {
  delete psf;
}

sciproxy_status sciproxy_specex_psf_get_info(const sciproxy_specex_psf* psf,
                                             sciproxy_specex_psf_info* info) {
  return guarded([&] {
    const sx::PsfModel& m = psf_of(psf).model();
    require_pointer(info, "info");
    *info = {};
    info->nspec = m.nspec;
    info->version = m.version;
    info->npix_x = m.npix_x;
    info->npix_y = m.npix_y;
    info->hsizex = m.hsizex;
    info->hsizey = m.hsizey;
    info->ghdegx = m.ghdegx;
    info->ghdegy = m.ghdegy;
    info->psferr = m.psferr;
    info->wmin = m.wmin;
    info->wmax = m.wmax;
    info->wmin_all = m.wmin_all;
    info->wmax_all = m.wmax_all;
  });
}

sciproxy_status sciproxy_specex_psf_xy(const sciproxy_specex_psf* psf, int32_t ispec,
                                       const double* wavelengths, int64_t n, double* x, double* y) {
  return guarded([&] {
    const sx::Psf& p = psf_of(psf);
    require(ispec >= 0 && ispec < p.nspec(), "ispec", fmt::format("a fibre in [0, {})", p.nspec()),
            std::to_string(ispec));
    require(n >= 0, "n", "a count >= 0", std::to_string(n));
    if (n > 0) require_pointer(wavelengths, "wavelengths");
    for (int64_t i = 0; i < n; ++i) {
      if (x) x[i] = p.x(ispec, wavelengths[i]);
      if (y) y[i] = p.y(ispec, wavelengths[i]);
    }
  });
}

sciproxy_status sciproxy_specex_psf_wavelength(const sciproxy_specex_psf* psf, int32_t ispec,
                                               const double* y, int64_t n, double* wavelengths) {
  return guarded([&] {
    const sx::Psf& p = psf_of(psf);
    require(ispec >= 0 && ispec < p.nspec(), "ispec", fmt::format("a fibre in [0, {})", p.nspec()),
            std::to_string(ispec));
    require(n >= 0, "n", "a count >= 0", std::to_string(n));
    if (n == 0) return;
    require_pointer(y, "y");
    require_pointer(wavelengths, "wavelengths");
    for (int64_t i = 0; i < n; ++i) wavelengths[i] = p.wavelength(ispec, y[i]);
  });
}

sciproxy_status sciproxy_specex_psf_xyrange(const sciproxy_specex_psf* psf, int32_t specmin,
                                            int32_t specmax, double wavemin, double wavemax,
                                            int64_t range[4]) {
  return guarded([&] {
    const sx::Psf& p = psf_of(psf);
    require_pointer(range, "range");
    require(specmin >= 0 && specmin < specmax && specmax <= p.nspec(), "specmin, specmax",
            fmt::format("fibres 0 <= specmin < specmax <= {}", p.nspec()),
            fmt::format("{}, {}", specmin, specmax));
    require(std::isfinite(wavemin) && std::isfinite(wavemax) && wavemin <= wavemax,
            "wavemin, wavemax", "finite wavelengths, wavemin <= wavemax",
            fmt::format("{}, {}", wavemin, wavemax));
    const sx::PixelRange r = p.xyrange(specmin, specmax, wavemin, wavemax);
    range[0] = r.xmin;
    range[1] = r.xmax;
    range[2] = r.ymin;
    range[3] = r.ymax;
  });
}

sciproxy_status sciproxy_specex_project(const sciproxy_specex_psf* psf, const double* wavelengths,
                                        int64_t nwave, const double* phot, int32_t specmin,
                                        int32_t nspec, const int64_t* range, int nparallel,
                                        double* image, int64_t image_size) {
  return guarded([&] {
    const sx::Psf& p = psf_of(psf);
    require(nwave >= 1, "nwave", "at least 1 wavelength", std::to_string(nwave));
    require(nspec >= 1, "nspec", "at least 1 spectrum", std::to_string(nspec));
    require_pointer(wavelengths, "wavelengths");
    require_pointer(phot, "phot");
    require_pointer(image, "image");
    const auto nphot = sciproxy::capi::checked_product(nwave, nspec, "nspec x nwave");
    std::optional<sx::PixelRange> r;
    if (range) r = sx::PixelRange{range[0], range[1], range[2], range[3]};
    const int64_t want = r ? sciproxy::capi::checked_product(std::max<int64_t>(r->ny(), 0),
                                                             std::max<int64_t>(r->nx(), 0), "range")
                           : p.npix_y() * p.npix_x();
    require(image_size == want, "image_size",
            fmt::format("ny x nx = {} values ({})", want, r ? "the range's" : "the whole CCD"),
            std::to_string(image_size));
    const auto out = sx::project(p, {wavelengths, static_cast<std::size_t>(nwave)},
                                 {phot, static_cast<std::size_t>(nphot)}, specmin, r,
                                 nparallel > 0 ? nparallel : 0);
    require(out.size() == static_cast<std::size_t>(want), "image", "the range's pixels",
            std::to_string(out.size()));
    sciproxy::capi::copy_out(out, image, "image");
  });
}

void sciproxy_specex_options_default(sciproxy_specex_options* options) {
  if (!options) return;
  const sx::Ex2dOptions d;
  *options = {};
  options->struct_size = sizeof(sciproxy_specex_options);
  options->device = "auto";
  options->bundlesize = d.bundlesize;
  options->nsubbundles = d.nsubbundles;
  options->wavesize = d.wavesize;
  options->regularize = d.regularize;
  options->ndecorr = d.ndecorr ? 1 : 0;
  options->pixpad_frac = d.pixpad_frac;
  options->wavepad_frac = d.wavepad_frac;
  options->psferr = -1;
  options->full_output = d.full_output ? 1 : 0;
  options->nparallel = d.nparallel;
  options->comm = SCIPROXY_NO_COMM;
  options->result_layout = static_cast<int32_t>(d.result_layout);
}

sciproxy_status sciproxy_specex_ex2d_shape(const sciproxy_specex_input* input,
                                           const sciproxy_specex_options* options, int32_t* ndiag,
                                           int64_t* npatches) {
  return guarded([&] {
    const auto c = read(options);
    const auto opt = options_of(c);
    const Input in = input_of(input);
    const auto patches =
        sx::ex2d_patches(*in.psf, in.image, in.specmin, in.nspec, in.wavelengths, opt);
    const double dw = in.wavelengths.size() > 1 ? in.wavelengths[1] - in.wavelengths[0] : 1.0;
    if (ndiag) *ndiag = sx::resolution_ndiag(*in.psf, in.specmin, in.nspec, dw);
    if (npatches) *npatches = static_cast<int64_t>(patches.size());
  });
}

sciproxy_status sciproxy_specex_ex2d(const sciproxy_specex_input* input,
                                     const sciproxy_specex_options* options, double* flux,
                                     double* ivar, double* resolution, int64_t resolution_size,
                                     double* chi2pix, double* pixmask_fraction, double* model,
                                     int32_t* ndiag) {
  return guarded([&] {
    const auto c = read(options);
    const sciproxy::Communicator comm = comm_of(c);
    sx::Ex2dOptions opt;
    Input in;
    sciproxy::Device dev;
    // Checked on every rank alike: one rank's error is every rank's, none waits in the call.
    sciproxy::collective::on_every_rank(comm, [&] {
      opt = options_of(c);
      opt.comm = comm;
      in = input_of(input);
      // On several ranks with the result on rank 0, the others' outputs are not written.
      const bool receives = opt.result_layout == sx::ResultLayout::all_ranks || comm.rank() == 0;
      if (receives) {
        require_pointer(flux, "flux");
        require_pointer(ivar, "ivar");
      }
      if (resolution && receives) {
        require(resolution_size >= 0, "resolution_size", "a size >= 0",
                std::to_string(resolution_size));
        // The arguments' checks first (ndiag assumes sensible ones).
        (void)sx::ex2d_patches(*in.psf, in.image, in.specmin, in.nspec, in.wavelengths, opt);
        const double dw = in.wavelengths.size() > 1 ? in.wavelengths[1] - in.wavelengths[0] : 1.0;
        const int nd = sx::resolution_ndiag(*in.psf, in.specmin, in.nspec, dw);
        const int64_t want = int64_t(in.nspec) * (2 * nd + 1) * int64_t(in.wavelengths.size());
        require(resolution_size == want, "resolution_size",
                fmt::format("nspec x (2 ndiag + 1) x nwave = {} (ndiag {})", want, nd),
                std::to_string(resolution_size));
      }
      const bool extras = chi2pix || pixmask_fraction || model;
      require(!extras || opt.full_output, "options.full_output",
              "non-zero when chi2pix, pixmask_fraction or model is asked for", "0");
      dev = sciproxy::capi::device_of(c.device);
    });
    const sx::Ex2dResult r =
        sx::ex2d(dev, *in.psf, in.image, in.specmin, in.nspec, in.wavelengths, opt);
    if (r.flux.empty() && comm.distributed()) {  // not this rank's to receive
      if (ndiag) *ndiag = r.ndiag;
      return;
    }
    sciproxy::capi::copy_out(r.flux, flux, "flux");
    sciproxy::capi::copy_out(r.ivar, ivar, "ivar");
    if (resolution) sciproxy::capi::copy_out(r.resolution, resolution, "resolution");
    if (chi2pix) sciproxy::capi::copy_out(r.chi2pix, chi2pix, "chi2pix");
    if (pixmask_fraction)
      sciproxy::capi::copy_out(r.pixmask_fraction, pixmask_fraction, "pixmask_fraction");
    if (model) sciproxy::capi::copy_out(r.model, model, "model");
    if (ndiag) *ndiag = r.ndiag;
  });
}

sciproxy_status sciproxy_specex_extract_frame(const sciproxy_specex_frame_input* input,
                                              const sciproxy_specex_options* options,
                                              int64_t* nwave, int64_t* npatches) {
  return guarded([&] {
    const auto c = read(options);
    const sciproxy::Communicator comm = comm_of(c);
    sx::Ex2dOptions opt;
    std::vector<double> wave;
    sciproxy::Device dev;
    sciproxy::collective::on_every_rank(comm, [&] {
      opt = options_of(c);
      opt.comm = comm;
      require_pointer(input, "input");
      require_pointer(input->image_path, "image_path");
      require_pointer(input->psf_path, "psf_path");
      require_pointer(input->frame_path, "frame_path");
      wave = sx::wavelength_grid(input->wmin, input->wmax, input->dw);
      dev = sciproxy::capi::device_of(c.device);
    });
    const sx::Ex2dResult r = sx::extract_frame(
        dev, input->image_path, input->psf_path, input->frame_path,
        input->model_path ? input->model_path : "", wave, input->specmin, input->nspec, opt);
    if (nwave) *nwave = r.nwave;
    if (npatches) *npatches = r.npatches;
  });
}

sciproxy_status sciproxy_specex_wavelength_grid(double wmin, double wmax, double dw,
                                                double* wavelengths, int64_t size, int64_t* n) {
  return guarded([&] {
    require(size >= 0, "size", "a size >= 0", std::to_string(size));
    const std::vector<double> w = sx::wavelength_grid(wmin, wmax, dw);
    if (n) *n = static_cast<int64_t>(w.size());
    if (size == 0) return;
    require(size >= static_cast<int64_t>(w.size()), "size",
            fmt::format("room for the {} wavelengths", w.size()), std::to_string(size));
    sciproxy::capi::copy_out(w, wavelengths, "wavelengths");
  });
}

}  // extern "C"
