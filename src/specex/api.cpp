// specex entry points: argument checks, the patch plan of specter's ex2d (bundles, subbundles,
// wavelength steps with their padding), the work model, and the dispatch to a backend
// (kernels.hpp). Semantics of specter.extract.ex2d (b8490d38); docs/kernels/specex.md.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "case.hpp"
#include "core/collective.hpp"
#include "core/recorded_call.hpp"
#include "kernels.hpp"
#include "math.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::specex {

namespace {

// Python's round(): halves to even (specter rounds pixpad_frac x spot rows with it).
long long round_half_even(double v) {
  return static_cast<long long>(std::nearbyint(v));
}

// The spot's rows and columns at the middle of the common wavelength range on fibre 0, clipped
// to the CCD (specter's psf.pix(0, wmid).shape).
std::pair<std::int64_t, std::int64_t> spot_shape(const Psf& psf) {
  const double wmid = (psf.model().wmin_all + psf.model().wmax_all) / 2;
  const Spot s = psf.spot(0, wmid);
  return {s.ny, s.nx};
}

// specter's split_bundle: subbundle sizes differing by at most one, the smaller ones moved
// inward, each extended by one neighbour on each side that is inside the bundle.
struct Subbundle {
  int first = 0, count = 0;  // the core, relative to the bundle
  int extract_first = 0, extract_count = 0;
};
std::vector<Subbundle> split_bundle(int bundlesize, int n) {
  std::vector<int> sizes(n);
  for (int i = 0; i < n; ++i) sizes[i] = bundlesize / n + (i < bundlesize % n ? 1 : 0);
  for (int i = 0; i + 1 < n; ++i)
    if (sizes[i] > sizes[i + 1]) std::swap(sizes[i], sizes[i + 1]);
  std::vector<Subbundle> out;
  int first = 0;
  for (const int size : sizes) {
    Subbundle s;
    s.first = first;
    s.count = size;
    s.extract_first = first > 0 ? first - 1 : first;
    const int last = first + size - 1 < bundlesize - 1 ? first + size : first + size - 1;
    s.extract_count = last - s.extract_first + 1;
    out.push_back(s);
    first += size;
  }
  return out;
}

std::string describe_range(const PixelRange& r) {
  return fmt::format("(xmin {}, xmax {}, ymin {}, ymax {})", r.xmin, r.xmax, r.ymin, r.ymax);
}

// The image the call reads, and the CCD pixels it covers.
PixelRange check_image(const Psf& psf, const ImageInput& image) {
  require(image.ny >= 1 && image.nx >= 1, "image", "a 2-D image with at least one pixel",
          fmt::format("{} x {}", image.ny, image.nx));
  const std::size_t npix = static_cast<std::size_t>(image.ny * image.nx);
  require(image.image.size() == npix, "image", fmt::format("{} x {} values", image.ny, image.nx),
          fmt::format("{} values", image.image.size()));
  require(image.ivar.size() == npix, "imageivar",
          fmt::format("the image's shape ({} x {})", image.ny, image.nx),
          fmt::format("{} values", image.ivar.size()));
  PixelRange r{0, psf.npix_x(), 0, psf.npix_y()};
  if (image.range) {
    r = *image.range;
    require(r.nx() == image.nx && r.ny() == image.ny, "xyrange",
            fmt::format("the image's shape ({} rows x {} columns)", image.ny, image.nx),
            fmt::format("{} ({} x {})", describe_range(r), r.ny(), r.nx()));
  } else {
    require(image.ny == psf.npix_y() && image.nx == psf.npix_x(), "image",
            fmt::format("the whole CCD of the PSF ({} x {}), or a cut-out with xyrange",
                        psf.npix_y(), psf.npix_x()),
            fmt::format("{} x {}", image.ny, image.nx));
  }
  std::size_t nan = 0, first_nan = 0, negative = 0, first_negative = 0;
  for (std::size_t k = 0; k < npix; ++k) {
    if (!std::isfinite(image.image[k]) && nan++ == 0) first_nan = k;
    if (!(image.ivar[k] >= 0 && std::isfinite(image.ivar[k])) && negative++ == 0)
      first_negative = k;
  }
  auto where = [&](std::size_t k) {
    return fmt::format("row {}, column {}", static_cast<std::int64_t>(k) / image.nx,
                       static_cast<std::int64_t>(k) % image.nx);
  };
  require(nan == 0, "image", "finite pixel values (mask bad pixels with ivar = 0 instead)",
          nan ? fmt::format("{} non-finite pixels, the first {} at {}", nan, image.image[first_nan],
                            where(first_nan))
              : "");
  require(negative == 0, "imageivar", "finite values >= 0",
          negative ? fmt::format("{} bad values, the first {} at {}", negative,
                                 image.ivar[first_negative], where(first_negative))
                   : "");
  return r;
}

// Checks the wavelength grid (linear, increasing, inside the PSF) and returns its step.
double check_wavelengths(const Psf& psf, std::span<const double> w) {
  require(w.size() >= 2, "wavelengths", "at least two wavelengths (a linear grid)",
          fmt::format("{}", w.size()));
  for (std::size_t k = 0; k < w.size(); ++k)
    require(std::isfinite(w[k]), "wavelengths", "finite values",
            fmt::format("{} at index {}", w[k], k));
  const double dw = w[1] - w[0];
  require(dw > 0, "wavelengths", "increasing values", fmt::format("{} then {}", w[0], w[1]));
  for (std::size_t k = 1; k < w.size(); ++k) {
    const double step = w[k] - w[k - 1];
    // numpy.allclose(dw, diff) as specter checks it.
    require(std::abs(dw - step) <= 1e-8 + 1e-5 * std::abs(step), "wavelengths",
            fmt::format("a linear grid (step {})", dw),
            fmt::format("a step of {} between indices {} and {}", step, k - 1, k));
  }
  require(w.front() >= psf.wmin() && w.back() <= psf.wmax(), "wavelengths",
          fmt::format("values within the PSF's range [{:.2f}, {:.2f}] Angstrom", psf.wmin(),
                      psf.wmax()),
          fmt::format("[{}, {}]", w.front(), w.back()));
  return dw;
}

void check_spectra(const Psf& psf, int specmin, int nspec) {
  require(specmin >= 0, "specmin", "a fibre index >= 0", std::to_string(specmin));
  require(nspec >= 1, "nspec", "at least 1", std::to_string(nspec));
  require(
      static_cast<long long>(specmin) + nspec <= psf.nspec(), "specmin, nspec",
      fmt::format("fibres within the PSF's {} (specmin + nspec <= {})", psf.nspec(), psf.nspec()),
      fmt::format("specmin {} + nspec {} = {}", specmin, nspec,
                  static_cast<long long>(specmin) + nspec));
}

void check_options(const Ex2dOptions& o, int specmin, int nspec) {
  require(o.bundlesize >= 1, "bundlesize", "at least 1", std::to_string(o.bundlesize));
  require(o.nsubbundles >= 1 && o.nsubbundles <= o.bundlesize, "nsubbundles",
          fmt::format("1 to bundlesize ({})", o.bundlesize), std::to_string(o.nsubbundles));
  require(o.bundlesize % o.nsubbundles == 0, "bundlesize",
          fmt::format("a multiple of nsubbundles ({})", o.nsubbundles),
          std::to_string(o.bundlesize));
  require(nspec % o.bundlesize == 0, "nspec",
          fmt::format("a multiple of bundlesize ({})", o.bundlesize), std::to_string(nspec));
  require(specmin % o.bundlesize == 0, "specmin",
          fmt::format("the first fibre of a bundle (a multiple of bundlesize, {})", o.bundlesize),
          std::to_string(specmin));
  require(o.wavesize >= 1, "wavesize", "at least 1", std::to_string(o.wavesize));
  require(std::isfinite(o.regularize) && o.regularize >= 0, "regularize", "a finite value >= 0",
          fmt::format("{}", o.regularize));
  // Paddings are fractions of a spot (specter: 0.8 and 0.2); beyond 10 spots a patch's padding
  // reaches rows where the inverse trace is extrapolated far outside its fit.
  require(std::isfinite(o.pixpad_frac) && o.pixpad_frac >= 0 && o.pixpad_frac <= 10, "pixpad_frac",
          "a fraction of a spot's rows from 0 to 10", fmt::format("{}", o.pixpad_frac));
  require(std::isfinite(o.wavepad_frac) && o.wavepad_frac >= 0 && o.wavepad_frac <= 10,
          "wavepad_frac", "a fraction of a spot's rows from 0 to 10",
          fmt::format("{}", o.wavepad_frac));
  if (o.psferr)
    require(std::isfinite(*o.psferr) && *o.psferr >= 0, "psferr", "a finite value >= 0",
            fmt::format("{}", *o.psferr));
  resolve_threads(o.nparallel, "nparallel");
}

}  // namespace

int resolution_ndiag(const Psf& psf, int specmin, int nspec, double dw) {
  check_spectra(psf, specmin, nspec);
  require(std::isfinite(dw) && dw > 0, "dw", "a positive wavelength step", fmt::format("{}", dw));
  long long ndiag = 0;
  const double wmin = psf.wmin(), wmax = psf.wmax();
  for (const int ispec : {specmin, specmin + nspec / 2, specmin + nspec - 1})
    for (const double w : {wmin, 0.5 * (wmin + wmax), wmax})
      ndiag = std::max(ndiag, round_half_even(9.0 * psf.wdisp(ispec, w) / dw));
  const auto [ny, nx] = spot_shape(psf);
  return static_cast<int>(
      std::min({ndiag, static_cast<long long>(ny / 2), static_cast<long long>(nx / 2)}));
}

std::vector<PatchPlan> ex2d_patches(const Psf& psf, const ImageInput& image, int specmin, int nspec,
                                    std::span<const double> wavelengths, const Ex2dOptions& o) {
  check_spectra(psf, specmin, nspec);
  check_options(o, specmin, nspec);
  const double dw = check_wavelengths(psf, wavelengths);
  const PixelRange bounds = check_image(psf, image);
  const int ndiag = resolution_ndiag(psf, specmin, nspec, dw);
  const auto [spot_ny, spot_nx] = spot_shape(psf);
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.size());
  const long long extra_rows = round_half_even(o.pixpad_frac * double(spot_ny));
  const auto wave_rows = static_cast<std::int64_t>(o.wavepad_frac * double(spot_ny));
  std::vector<PatchPlan> plan;
  for (int bundlelo = specmin; bundlelo < specmin + nspec; bundlelo += o.bundlesize) {
    const int bundlehi = std::min(bundlelo + o.bundlesize, specmin + nspec);
    const int nsub = std::min(bundlehi - bundlelo, o.nsubbundles);
    for (const Subbundle& sb : split_bundle(bundlehi - bundlelo, nsub)) {
      const int speclo = bundlelo + sb.extract_first, spechi = speclo + sb.extract_count;
      for (std::int64_t iwave = 0; iwave < nwave; iwave += o.wavesize) {
        PatchPlan p;
        p.speclo = speclo;
        p.nspec = spechi - speclo;
        p.keeplo = sb.first - sb.extract_first;
        p.nkeep = sb.count;
        p.iwave = iwave;
        p.ncore = static_cast<int>(std::min<std::int64_t>(o.wavesize, nwave - iwave));
        const double wlo = wavelengths[iwave], whi = wavelengths[iwave + p.ncore - 1];
        PixelRange r = psf.xyrange(speclo, spechi, wlo, whi);
        r.ymin = std::max<std::int64_t>(r.ymin - extra_rows, bounds.ymin);
        r.ymax = std::min<std::int64_t>(r.ymax + extra_rows, bounds.ymax);
        // specter leaves x to numpy's slicing; a cut-out narrower than the spectra is clipped.
        r.xmin = std::max(r.xmin, bounds.xmin);
        r.xmax = std::min(r.xmax, bounds.xmax);
        require(r.nx() > 0 && r.ny() > 0, "xyrange",
                fmt::format("an image that covers spectra {}-{} at {:.2f}-{:.2f} Angstrom", speclo,
                            spechi - 1, wlo, whi),
                fmt::format("{}, which does not reach them", describe_range(bounds)));
        p.pixels = r;
        // Padding bins: those whose spots reach into the rows above and below, at least ndiag.
        const double wbelow = psf.wavelength(speclo, double(r.ymin - wave_rows));
        const double wabove = psf.wavelength(speclo, double(r.ymax + wave_rows));
        p.nlo = static_cast<int>(
            std::max<long long>(static_cast<long long>((wlo - wbelow) / dw) - 1, ndiag));
        p.nhi = static_cast<int>(
            std::max<long long>(static_cast<long long>((wabove - whi) / dw) - 1, ndiag));
        p.wfirst = wlo - p.nlo * dw;
        plan.push_back(p);
      }
    }
  }
  return plan;
}

WorkModel ex2d_work(const std::vector<PatchPlan>& patches, const PsfModel& psf, bool ndecorr) {
  // The work of the tuned backends, per patch of n flux bins over npix pixels, with spots of
  // sx x sy pixels and g Gauss-Hermite terms:
  //   spots          n (2 g sx + 2 (ghdegy + 1) sx sy)
  //   A^T W A        2 n sx sy (2 hsizey + 1): each spot against the spots it overlaps
  //   signal mode    banded Cholesky n kd^2 and the band of its inverse 2 n kd^2, kd = 2 nwave
  //                  + 2 hsizey (fibres two apart still overlap), then per fibre the
  //                  eigendecomposition of its nwave x nwave block of C and Q_b = V f V^T
  //   noise mode     Cholesky n^3/3, the eigendecomposition of iCov and Q = V f V^T
  //   an eigendecomposition with vectors of an m x m matrix: 10/3 m^3 (tridiagonal reduction
  //   4/3 m^3, back transformation 2 m^3); V f V^T: 2 m^3; R x: 2 n nw (signal), 2 n^2 (noise)
  // The reference does more (a dense eigendecomposition of iCov); its rate is counted on this
  // same work. Bytes: the patch's pixels and ivar read, its kept outputs written.
  const double sx = 2 * psf.hsizex + 1, sy = 2 * psf.hsizey + 1;
  const double g = double(psf.ghdegx + 1) * double(psf.ghdegy + 1);
  WorkModel w;
  for (const PatchPlan& p : patches) {
    const double n = p.nflux(), nw = p.nwave(), npix = double(p.npix());
    const double kd = std::min(n - 1, 2 * nw + 2 * psf.hsizey);
    w.flops += n * (2 * g * sx + 2 * (psf.ghdegy + 1) * sx * sy);
    w.flops += 2 * n * sx * sy * (2 * psf.hsizey + 1);
    const double eig_and_compose = 10.0 / 3 + 2;  // per m^3
    if (ndecorr)
      w.flops += (1.0 / 3 + eig_and_compose) * n * n * n + 2 * n * n;
    else
      w.flops += 3 * n * kd * kd + p.nspec * eig_and_compose * nw * nw * nw + 2 * n * nw;
    w.bytes += 16 * npix + 8.0 * p.nkeep * p.ncore * (4 + 2 * 5 + 1);
    w.points += 1;
  }
  w.point_unit = "patches";
  return w;
}

namespace {

// The pixels a bundle's patches cover: the bounding box of their rectangles (inside the image,
// as ex2d_patches clips them).
PixelRange bundle_box(std::span<const PatchPlan> patches) {
  PixelRange box = patches.front().pixels;
  for (const PatchPlan& q : patches) {
    box.xmin = std::min(box.xmin, q.pixels.xmin);
    box.xmax = std::max(box.xmax, q.pixels.xmax);
    box.ymin = std::min(box.ymin, q.pixels.ymin);
    box.ymax = std::max(box.ymax, q.pixels.ymax);
  }
  return box;
}

// What one process extracts: bundles [first, first + count) of the plan, into arrays covering
// their spectra (rows first x bundlesize ... of the whole, per Angstrom).
struct Part {
  std::int64_t nspec = 0;
  std::vector<double> flux, ivar, resolution, chi2pix, pixmask_fraction;
  std::int64_t retried = 0;
};
// Receives each bundle's model (its patches' core models summed from zero over its box), in
// bundle order.
using ModelSink = std::function<void(int bundle, const PixelRange& box, std::vector<double>&)>;

// The extraction shared by one process and the ranks: every bundle solved with the image cut to
// the bundle's box, so that its model is summed on its own and the whole is the same on any
// number of ranks. The kernels read the image only where the patches lie, so the bits of flux,
// ivar and resolution do not depend on the cut.
Part extract_part(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                  int nspec, std::span<const double> wavelengths, const Ex2dOptions& o,
                  const std::vector<PatchPlan>& plan, int ndiag, collective::Block bundles,
                  const ModelSink& sink, Timers* timers, const char* kernel) {
  const std::int64_t nbundles = nspec / o.bundlesize;
  const std::int64_t per_bundle = static_cast<std::int64_t>(plan.size()) / nbundles;
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.size());
  const int first_spec = specmin + static_cast<int>(bundles.first) * o.bundlesize;
  Part part;
  part.nspec = bundles.count * o.bundlesize;
  const std::size_t per_bin = static_cast<std::size_t>(part.nspec * nwave);
  require_memory(8 * double(per_bin) * (2 + (2 * ndiag + 1) + (o.full_output ? 2 : 0)),
                 "nspec, wavelengths",
                 fmt::format("{} spectra x {} wavelengths", part.nspec, nwave));
  part.flux.assign(per_bin, 0.0);
  part.ivar.assign(per_bin, 0.0);
  part.resolution.assign(per_bin * static_cast<std::size_t>(2 * ndiag + 1), 0.0);
  if (o.full_output) {
    part.chi2pix.assign(per_bin, 0.0);
    part.pixmask_fraction.assign(per_bin, 0.0);
  }
  const std::span<const PatchPlan> mine =
      std::span(plan).subspan(static_cast<std::size_t>(bundles.first * per_bundle),
                              static_cast<std::size_t>(bundles.count * per_bundle));

  RecordedCall call(kernel, device, timers);
  call.set_work(
      ex2d_work(std::vector<PatchPlan>(mine.begin(), mine.end()), psf.model(), o.ndecorr));
  call.parameters().set("nspec", static_cast<long long>(part.nspec));
  call.parameters().set("nwave", static_cast<long long>(nwave));
  call.parameters().set("patches", static_cast<long long>(mine.size()));

  kernels::Problem p;
  p.psf = &psf.model();
  const PixelRange image_range = image.range.value_or(PixelRange{0, psf.npix_x(), 0, psf.npix_y()});
  p.dw = wavelengths[1] - wavelengths[0];
  p.nspec = part.nspec;
  p.nwave = nwave;
  p.specmin = first_spec;
  p.ndiag = ndiag;
  p.regularize = o.regularize;
  p.ndecorr = o.ndecorr;
  p.psferr = o.psferr.value_or(psf.model().psferr);
  p.full_output = o.full_output;
  p.nparallel = o.nparallel;
  const Context ctx{device, call.timers()};
  kernels::Outputs out;
  out.flux = part.flux.data();
  out.ivar = part.ivar.data();
  out.resolution = part.resolution.data();
  out.chi2pix = o.full_output ? part.chi2pix.data() : nullptr;
  out.pixmask_fraction = o.full_output ? part.pixmask_fraction.data() : nullptr;
  std::vector<double> box_image, box_ivar, box_model;
  // Bundle by bundle, so that a progress line can follow and Ctrl-C stops between bundles.
  const int count = static_cast<int>(bundles.count);
  for (int k = 0; k < count; ++k) {
    throw_if_cancelled(kernel, k, count, "bundles");
    const int b = static_cast<int>(bundles.first) + k;
    const std::span<const PatchPlan> patches = std::span(plan).subspan(
        static_cast<std::size_t>(b * per_bundle), static_cast<std::size_t>(per_bundle));
    const PixelRange box = bundle_box(patches);
    const std::size_t npix = static_cast<std::size_t>(box.nx() * box.ny());
    box_image.resize(npix);
    box_ivar.resize(npix);
    for (std::int64_t y = box.ymin; y < box.ymax; ++y) {
      const std::size_t from = static_cast<std::size_t>((y - image_range.ymin) * image_range.nx() +
                                                        (box.xmin - image_range.xmin));
      const std::size_t to = static_cast<std::size_t>((y - box.ymin) * box.nx());
      std::copy_n(image.image.begin() + from, box.nx(), box_image.begin() + to);
      std::copy_n(image.ivar.begin() + from, box.nx(), box_ivar.begin() + to);
    }
    p.image = box_image.data();
    p.ivar = box_ivar.data();
    p.image_range = box;
    p.patches = patches.data();
    p.npatches = per_bundle;
    out.model = nullptr;
    if (o.full_output && sink) {
      box_model.assign(npix, 0.0);
      out.model = box_model.data();
    }
    out.retried_patches = 0;
    SCIPROXY_RUN_KERNEL(ctx, extract, p, out);
    part.retried += out.retried_patches;
    if (out.model) sink(b, box, box_model);
    if (o.progress) o.progress(o.progress_context, k + 1, count);
  }
  // Per Angstrom (specter: numpy.gradient of the wavelengths, constant on a linear grid).
  for (std::int64_t i = 0; i < part.nspec; ++i)
    for (std::int64_t j = 0; j < nwave; ++j) {
      const double step = nwave == 1       ? 1.0
                          : j == 0         ? wavelengths[1] - wavelengths[0]
                          : j == nwave - 1 ? wavelengths[j] - wavelengths[j - 1]
                                           : (wavelengths[j + 1] - wavelengths[j - 1]) / 2;
      part.flux[i * nwave + j] /= step;
      part.ivar[i * nwave + j] *= step * step;
    }
  call.parameters().set("retried_patches", static_cast<long long>(part.retried));
  if (call.verifying() && part.nspec > 0) {  // a rank without bundles has nothing to check
    const Part expected = call.on_reference([&] {
      return extract_part(RecordedCall::reference_device(), psf, image, specmin, nspec, wavelengths,
                          o, plan, ndiag, bundles, nullptr, nullptr, kernel);
    });
    const Tolerance tol = ex2d_tolerance();
    call.compare<double>("flux", part.flux, expected.flux, tol);
    call.compare<double>("ivar", part.ivar, expected.ivar, tol);
    call.compare<double>("resolution", part.resolution, expected.resolution, tol);
  }
  return part;
}

// Adds a bundle's model into the image's (covering `range`).
void add_bundle_model(const PixelRange& range, const PixelRange& box, const double* pixels,
                      double* model) {
  for (std::int64_t y = box.ymin; y < box.ymax; ++y) {
    double* row = model + (y - range.ymin) * range.nx() + (box.xmin - range.xmin);
    const double* from = pixels + (y - box.ymin) * box.nx();
    for (std::int64_t x = 0; x < box.nx(); ++x) row[x] += from[x];
  }
}

// What every rank must pass alike: the spectra, the wavelengths, the options, the PSF and the
// image (sizes, and hashes of the values).
std::vector<collective::Field> agreed_fields(const Psf& psf, const ImageInput& image, int specmin,
                                             int nspec, std::span<const double> wavelengths,
                                             const Ex2dOptions& o) {
  auto bits = [](double v) {
    std::int64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  const PixelRange r = image.range.value_or(PixelRange{-1, -1, -1, -1});
  const PsfModel& m = psf.model();
  std::uint64_t psf_hash = collective::hash_bytes(m.x.coeff.data(), 8 * m.x.coeff.size());
  psf_hash = collective::hash_bytes(m.y.coeff.data(), 8 * m.y.coeff.size(), psf_hash);
  psf_hash = collective::hash_bytes(m.w.coeff.data(), 8 * m.w.coeff.size(), psf_hash);
  psf_hash = collective::hash_bytes(m.params.data(), 8 * m.params.size(), psf_hash);
  return {{"specmin", specmin},
          {"nspec", nspec},
          {"result_layout", static_cast<int>(o.result_layout)},
          {"bundlesize", o.bundlesize},
          {"nsubbundles", o.nsubbundles},
          {"wavesize", o.wavesize},
          {"regularize", bits(o.regularize)},
          {"ndecorr", o.ndecorr},
          {"pixpad_frac", bits(o.pixpad_frac)},
          {"wavepad_frac", bits(o.wavepad_frac)},
          {"psferr", o.psferr ? bits(*o.psferr) : -1},
          {"full_output", o.full_output},
          {"nwave", static_cast<std::int64_t>(wavelengths.size())},
          {"wavelengths", collective::hash_of(wavelengths), true},
          {"psf", static_cast<std::int64_t>(psf_hash), true},
          {"image rows", image.ny},
          {"image columns", image.nx},
          {"xyrange xmin", r.xmin},
          {"xyrange xmax", r.xmax},
          {"xyrange ymin", r.ymin},
          {"xyrange ymax", r.ymax},
          {"image", collective::hash_of(image.image), true},
          {"imageivar", collective::hash_of(image.ivar), true}};
}

// ex2d on the ranks of o.comm: rank r extracts its block of bundles, then the rows of every
// array and the bundles' models go to rank 0 (or every rank), which adds the models in bundle
// order as one process does.
Ex2dResult ex2d_on_ranks(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                         int nspec, std::span<const double> wavelengths, const Ex2dOptions& o,
                         Timers* timers) {
  const Communicator& comm = o.comm;
  auto region = Timers::region(timers, "ex2d");
  std::vector<PatchPlan> plan;
  int ndiag = 0;
  collective::on_every_rank(comm, [&] {
    require(o.result_layout == ResultLayout::all_ranks || o.result_layout == ResultLayout::root,
            "result_layout", "0 (all ranks) or 1 (rank 0)",
            std::to_string(static_cast<int>(o.result_layout)));
    plan = ex2d_patches(psf, image, specmin, nspec, wavelengths, o);
    ndiag = resolution_ndiag(psf, specmin, nspec, wavelengths[1] - wavelengths[0]);
  });
  collective::require_same(comm, agreed_fields(psf, image, specmin, nspec, wavelengths, o), "ex2d");

  const int nbundles = nspec / o.bundlesize;
  const std::int64_t per_bundle = static_cast<std::int64_t>(plan.size()) / nbundles;
  const bool holds_all = o.result_layout == ResultLayout::all_ranks || comm.rank() == 0;
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.size());
  std::vector<PixelRange> boxes;
  std::vector<std::int64_t> bundle_at;  // each bundle's offset in the gathered models
  std::int64_t model_values = 0;
  for (int b = 0; b < nbundles; ++b) {
    boxes.push_back(bundle_box(std::span(plan).subspan(static_cast<std::size_t>(b * per_bundle),
                                                       static_cast<std::size_t>(per_bundle))));
    bundle_at.push_back(model_values);
    model_values += boxes.back().nx() * boxes.back().ny();
  }
  const collective::Block block = collective::block_of(nbundles, comm);
  // The models go out as one array per rank: its bundles' boxes one after the other.
  const bool models = o.full_output;
  std::vector<double> model_values_all;  // every bundle's model, where this rank receives them
  std::vector<double> model_mine;
  Ex2dOptions local = o;
  local.comm = Communicator();
  Part part;
  Ex2dResult r;
  r.nspec = nspec;
  r.nwave = nwave;
  r.ndiag = ndiag;
  r.npatches = static_cast<std::int64_t>(plan.size());
  collective::on_every_rank(comm, [&] {
    const std::int64_t mine_values =
        block.count > 0 ? (block.first + block.count < nbundles
                               ? bundle_at[static_cast<std::size_t>(block.first + block.count)]
                               : model_values) -
                              bundle_at[static_cast<std::size_t>(block.first)]
                        : 0;
    if (holds_all) {
      const double per_bin = double(nspec) * double(nwave);
      require_memory(8 * per_bin * (2 + (2 * ndiag + 1) + (models ? 2 : 0)) +
                         (models ? 8.0 * double(image.ny * image.nx + model_values) : 0.0),
                     "nspec, wavelengths",
                     fmt::format("{} spectra x {} wavelengths, gathered", nspec, nwave));
    }
    if (models) model_mine.reserve(static_cast<std::size_t>(mine_values));
    const ModelSink keep = [&](int, const PixelRange&, std::vector<double>& pixels) {
      model_mine.insert(model_mine.end(), pixels.begin(), pixels.end());
    };
    part = extract_part(device, psf, image, specmin, nspec, wavelengths, local, plan, ndiag, block,
                        models ? keep : ModelSink(), timers, "ex2d");
  });

  auto exchange = Timers::region(timers, "exchange");
  r.retried_patches = part.retried;
  collective::allreduce_sum(comm, std::span(&r.retried_patches, 1));
  std::vector<std::int64_t> spectra, values;
  for (int q = 0; q < comm.size(); ++q) {
    const collective::Block bq = collective::block_of(nbundles, q, comm.size());
    spectra.push_back(bq.count * o.bundlesize);
    values.push_back(bq.count > 0 ? (bq.first + bq.count < nbundles
                                         ? bundle_at[static_cast<std::size_t>(bq.first + bq.count)]
                                         : model_values) -
                                        bundle_at[static_cast<std::size_t>(bq.first)]
                                  : 0);
  }
  auto gather = [&](std::vector<double>& mine, std::vector<double>& all, std::int64_t total,
                    std::int64_t row, std::span<const std::int64_t> counts, std::int64_t first) {
    if (holds_all) all.assign(static_cast<std::size_t>(total * row), 0.0);
    if (o.result_layout == ResultLayout::all_ranks) {
      std::copy(mine.begin(), mine.end(), all.begin() + first * row);
      std::vector<double>().swap(mine);
      collective::allgather_rows<double>(comm, all, counts, row);
    } else {
      collective::gather_rows<double>(comm, mine, all, counts, row, 0);
      std::vector<double>().swap(mine);
    }
  };
  const std::int64_t first_spec = block.first * o.bundlesize;
  gather(part.flux, r.flux, nspec, nwave, spectra, first_spec);
  gather(part.ivar, r.ivar, nspec, nwave, spectra, first_spec);
  gather(part.resolution, r.resolution, nspec, (2 * ndiag + 1) * nwave, spectra, first_spec);
  if (models) {
    gather(part.chi2pix, r.chi2pix, nspec, nwave, spectra, first_spec);
    gather(part.pixmask_fraction, r.pixmask_fraction, nspec, nwave, spectra, first_spec);
    gather(model_mine, model_values_all, model_values, 1, values,
           block.count > 0 ? bundle_at[static_cast<std::size_t>(block.first)] : 0);
    if (holds_all) {
      const PixelRange range = image.range.value_or(PixelRange{0, psf.npix_x(), 0, psf.npix_y()});
      r.model.assign(static_cast<std::size_t>(image.ny * image.nx), 0.0);
      for (int b = 0; b < nbundles; ++b)
        add_bundle_model(range, boxes[static_cast<std::size_t>(b)],
                         model_values_all.data() + bundle_at[static_cast<std::size_t>(b)],
                         r.model.data());
    }
  }
  return r;
}

}  // namespace

Ex2dResult ex2d(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                int nspec, std::span<const double> wavelengths, const Ex2dOptions& o,
                Timers* timers) {
  if (o.comm.distributed())
    return ex2d_on_ranks(device, psf, image, specmin, nspec, wavelengths, o, timers);
  const std::vector<PatchPlan> plan = ex2d_patches(psf, image, specmin, nspec, wavelengths, o);
  const double dw = wavelengths[1] - wavelengths[0];
  Ex2dResult r;
  r.nspec = nspec;
  r.nwave = static_cast<std::int64_t>(wavelengths.size());
  r.ndiag = resolution_ndiag(psf, specmin, nspec, dw);
  r.npatches = static_cast<std::int64_t>(plan.size());
  const PixelRange range = image.range.value_or(PixelRange{0, psf.npix_x(), 0, psf.npix_y()});
  if (o.full_output) {
    require_memory(8.0 * double(image.ny) * double(image.nx), "image",
                   fmt::format("a model image of {} x {}", image.ny, image.nx));
    r.model.assign(static_cast<std::size_t>(image.ny * image.nx), 0.0);
  }
  const ModelSink add = [&](int, const PixelRange& box, std::vector<double>& pixels) {
    add_bundle_model(range, box, pixels.data(), r.model.data());
  };
  Part part = extract_part(device, psf, image, specmin, nspec, wavelengths, o, plan, r.ndiag,
                           collective::Block{0, nspec / o.bundlesize},
                           o.full_output ? add : ModelSink(), timers, "ex2d");
  r.flux = std::move(part.flux);
  r.ivar = std::move(part.ivar);
  r.resolution = std::move(part.resolution);
  r.chi2pix = std::move(part.chi2pix);
  r.pixmask_fraction = std::move(part.pixmask_fraction);
  r.retried_patches = part.retried;
  return r;
}

PatchResult ex2d_patch(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                       int nspec, std::span<const double> wavelengths, double regularize,
                       bool ndecorr, Timers* timers) {
  check_spectra(psf, specmin, nspec);
  require(!wavelengths.empty(), "wavelengths", "at least one wavelength", "none");
  for (std::size_t k = 0; k < wavelengths.size(); ++k)
    require(std::isfinite(wavelengths[k]), "wavelengths", "finite values",
            fmt::format("{} at index {}", wavelengths[k], k));
  for (std::size_t k = 1; k < wavelengths.size(); ++k)
    require(wavelengths[k] > wavelengths[k - 1], "wavelengths", "increasing values",
            fmt::format("{} then {} at index {}", wavelengths[k - 1], wavelengths[k], k));
  require(std::isfinite(regularize) && regularize >= 0, "regularize", "a finite value >= 0",
          fmt::format("{}", regularize));
  // specter: the image is the cut-out of xyrange when given, else the whole CCD, from which
  // the patch takes the spectra's xyrange.
  const PixelRange bounds = check_image(psf, image);
  const PixelRange pixels =
      image.range ? *image.range
                  : psf.xyrange(specmin, specmin + nspec, wavelengths.front(), wavelengths.back());
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.size());
  const double nflux = double(nspec) * double(nwave);
  require_memory(8 * nflux * nflux * 4, "nspec, wavelengths",
                 fmt::format("the dense matrices of {} flux bins", nflux));
  PatchPlan plan;
  plan.speclo = specmin;
  plan.nspec = nspec;
  plan.keeplo = 0;
  plan.nkeep = nspec;
  plan.ncore = static_cast<int>(nwave);
  plan.wfirst = wavelengths.front();
  plan.pixels = pixels;

  RecordedCall call("ex2d_patch", device, timers);
  call.set_work(ex2d_work({plan}, psf.model(), ndecorr));
  kernels::Problem p;
  p.psf = &psf.model();
  p.image = image.image.data();
  p.ivar = image.ivar.data();
  p.image_range = bounds;
  p.patches = &plan;
  p.npatches = 1;
  p.dw = nwave > 1 ? wavelengths[1] - wavelengths[0] : 1.0;
  p.nspec = nspec;
  p.nwave = nwave;
  p.specmin = specmin;
  p.regularize = regularize;
  p.ndecorr = ndecorr;
  p.psferr = psf.model().psferr;
  p.full_output = false;
  PatchResult result;
  result.range = pixels;
  // The patch's wavelengths exactly as given (ex2d_patch takes any increasing grid).
  p.patch_wavelengths = wavelengths.data();
  SCIPROXY_RUN_KERNEL((Context{device, call.timers()}), solve_patch, p, result);
  return result;
}

std::vector<double> wavelength_grid(double wmin, double wmax, double dw) {
  require(std::isfinite(wmin) && std::isfinite(wmax) && std::isfinite(dw) && dw > 0 && wmax >= wmin,
          "wavelength", "wmin,wmax,dw with wmin <= wmax and dw > 0",
          fmt::format("{},{},{}", wmin, wmax, dw));
  // numpy.arange(wmin, wmax + dw/2, dw), as desispec builds the grid.
  const auto n = static_cast<std::int64_t>(std::ceil((wmax + dw / 2 - wmin) / dw));
  require(n <= 10'000'000, "wavelength", "at most 10 million wavelengths", fmt::format("{}", n));
  std::vector<double> w(static_cast<std::size_t>(n));
  const double delta = n > 1 ? (wmin + dw) - wmin : dw;
  for (std::int64_t i = 0; i < n; ++i) w[i] = i == 0 ? wmin : wmin + double(i) * delta;
  return w;
}

SimulatedImage simulate_image(const Psf& psf, std::span<const double> wavelengths,
                              std::span<const double> phot, int specmin,
                              std::optional<PixelRange> range, double read_noise,
                              std::uint64_t seed, int nparallel) {
  require(std::isfinite(read_noise) && read_noise > 0, "read_noise", "a finite value > 0",
          fmt::format("{}", read_noise));
  for (std::size_t k = 0; k < phot.size(); ++k)
    require(phot[k] >= 0, "phot", "photon counts >= 0", fmt::format("{} at index {}", phot[k], k));
  SimulatedImage s;
  s.range = range.value_or(PixelRange{0, psf.npix_x(), 0, psf.npix_y()});
  s.read_noise = read_noise;
  s.image = project(psf, wavelengths, phot, specmin, s.range, nparallel);
  s.ivar.resize(s.image.size());
  s.mask.assign(s.image.size(), 0);
  // Photon noise (Poisson) and read noise (Gaussian), one generator in pixel order.
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (std::size_t k = 0; k < s.image.size(); ++k) {
    const double mean = std::max(s.image[k], 0.0);
    double photons = 0;
    if (mean > 1e3) {
      photons = std::round(mean + std::sqrt(mean) * normal(engine));
    } else if (mean > 0) {
      std::poisson_distribution<long long> poisson(mean);
      photons = static_cast<double>(poisson(engine));
    }
    s.image[k] = photons + read_noise * normal(engine);
    s.ivar[k] = 1.0 / (std::max(s.image[k], 0.0) + read_noise * read_noise);
  }
  return s;
}

}  // namespace sciproxy::specex
