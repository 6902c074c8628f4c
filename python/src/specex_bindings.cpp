// sciproxy._sciproxy, specex part: bindings of the spectroperfectionism extraction
// (include/sciproxy/specex.hpp). The Python layer (python/sciproxy/specex.py) normalises the
// arguments to exactly these types (C-contiguous float64 arrays, int32 fibre indices, pixel
// ranges as 4-tuples of ints, options as a dict of plain Python values), so nothing is converted
// here; the library checks every value and names the argument. Results are handed to numpy
// without a copy; the GIL is released (and Ctrl-C honoured, between patches) during long calls.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/specex.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using sciproxy::python::Interruptible;

namespace {

namespace sx = sciproxy::specex;

using sciproxy::python::to_numpy;

using Vector = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Matrix = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Specs = nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Mask = nb::ndarray<const std::int16_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
// (xmin, xmax, ymin, ymax), specter's xyrange.
using Range = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

std::span<const double> span_of(const Vector& a) {
  return {a.data(), a.size()};
}
std::span<const double> span_of(const Matrix& a) {
  return {a.data(), a.size()};
}

std::optional<sx::PixelRange> range_of(const std::optional<Range>& r) {
  if (!r) return std::nullopt;
  sx::PixelRange p;
  std::tie(p.xmin, p.xmax, p.ymin, p.ymax) = *r;
  return p;
}

Range tuple_of(const sx::PixelRange& p) {
  return {p.xmin, p.xmax, p.ymin, p.ymax};
}

nb::object vector_to_numpy(std::vector<double>&& v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return to_numpy(std::move(v), {n});
}

nb::dict timers_to_python(const sciproxy::Timers& timers) {
  nb::dict d;
  for (const auto& s : timers.stats()) {
    nb::dict e;
    e["calls"] = s.calls;
    e["total"] = s.total;
    d[s.path.c_str()] = e;
  }
  return d;
}

// ---- the PSF ----

// x, y, wavelength or wdisp of fibres `ispec` (k) at `values` (k x n, or 1 x n shared by every
// fibre): (k, n).
nb::object psf_eval(const sx::Psf& psf, const std::string& what, const Specs& ispec,
                    const Matrix& values) {
  const auto k = static_cast<std::int64_t>(ispec.shape(0));
  const auto rows = static_cast<std::int64_t>(values.shape(0));
  const auto n = static_cast<std::int64_t>(values.shape(1));
  if (rows != 1 && rows != k)
    sciproxy::throw_invalid_argument(
        "values", "one row, or one per fibre",
        std::to_string(rows) + " rows for " + std::to_string(k) + " fibres");
  int which = -1;
  if (what == "x") which = 0;
  if (what == "y") which = 1;
  if (what == "wavelength") which = 2;
  if (what == "wdisp") which = 3;
  // "param:NAME": any spot parameter by its name.
  const std::string param = what.rfind("param:", 0) == 0 ? what.substr(6) : std::string();
  if (!param.empty()) which = 4;
  if (which < 0)
    sciproxy::throw_invalid_argument("what", "x, y, wavelength, wdisp or param:NAME", what);
  std::vector<double> out(static_cast<std::size_t>(k * n));
  {
    nb::gil_scoped_release release;
    for (std::int64_t i = 0; i < k; ++i) {
      const int s = ispec.data()[i];
      const double* v = values.data() + (rows == 1 ? 0 : i * n);
      double* o = out.data() + i * n;
      for (std::int64_t j = 0; j < n; ++j) {
        switch (which) {
          case 0:
            o[j] = psf.x(s, v[j]);
            break;
          case 1:
            o[j] = psf.y(s, v[j]);
            break;
          case 2:
            o[j] = psf.wavelength(s, v[j]);
            break;
          case 3:
            o[j] = psf.wdisp(s, v[j]);
            break;
          default:
            o[j] = psf.parameter(param, s, v[j]);
            break;
        }
      }
    }
  }
  return to_numpy(std::move(out), {k, n});
}

// (xstart, ystart, nx, ny, pixels[ny, nx]) of one spot.
nb::tuple psf_spot(const sx::Psf& psf, int ispec, double wavelength,
                   const std::optional<Range>& bounds) {
  sx::Spot s = psf.spot(ispec, wavelength, range_of(bounds));
  const std::int64_t nx = s.nx, ny = s.ny;
  return nb::make_tuple(s.xstart, s.ystart, nx, ny, to_numpy(std::move(s.pixels), {ny, nx}));
}

nb::object psf_projection_matrix(const sx::Psf& psf, int specmin, int specmax,
                                 const Vector& wavelengths, const Range& r) {
  const sx::PixelRange range = *range_of(r);
  std::vector<double> a;
  {
    nb::gil_scoped_release release;
    a = psf.projection_matrix(specmin, specmax, span_of(wavelengths), range);
  }
  const std::int64_t npix = range.nx() * range.ny();
  const auto ncols = static_cast<std::int64_t>(specmax - specmin) *
                     static_cast<std::int64_t>(wavelengths.shape(0));
  return to_numpy(std::move(a), {npix, ncols});
}

nb::dict psf_model(const sx::Psf& psf) {
  const sx::PsfModel& m = psf.model();
  nb::dict d;
  d["path"] = m.path;
  d["version"] = m.version;
  d["npix_x"] = m.npix_x;
  d["npix_y"] = m.npix_y;
  d["nspec"] = m.nspec;
  d["hsizex"] = m.hsizex;
  d["hsizey"] = m.hsizey;
  d["ghdegx"] = m.ghdegx;
  d["ghdegy"] = m.ghdegy;
  d["psferr"] = m.psferr;
  d["has_tail"] = m.has_tail;
  d["wmin"] = m.wmin;
  d["wmax"] = m.wmax;
  d["wmin_all"] = m.wmin_all;
  d["wmax_all"] = m.wmax_all;
  d["wmin_spec"] = vector_to_numpy(std::vector<double>(m.wmin_spec));
  d["wmax_spec"] = vector_to_numpy(std::vector<double>(m.wmax_spec));
  return d;
}

// ---- projection and simulation ----

// phot is (nspec, nwave); the image is `range` (default: the CCD).
nb::object project(const sx::Psf& psf, const Vector& wavelengths, const Matrix& phot, int specmin,
                   const std::optional<Range>& r, int nparallel) {
  const auto range = range_of(r);
  const std::int64_t ny = range ? range->ny() : psf.npix_y();
  const std::int64_t nx = range ? range->nx() : psf.npix_x();
  std::vector<double> image;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    image = sx::project(psf, span_of(wavelengths), span_of(phot), specmin, range, nparallel);
  }
  return to_numpy(std::move(image), {ny, nx});
}

nb::dict simulate_image(const sx::Psf& psf, const Vector& wavelengths, const Matrix& phot,
                        int specmin, const std::optional<Range>& r, double read_noise,
                        std::uint64_t seed, int nparallel) {
  sx::SimulatedImage sim;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    sim = sx::simulate_image(psf, span_of(wavelengths), span_of(phot), specmin, range_of(r),
                             read_noise, seed, nparallel);
  }
  const std::int64_t ny = sim.range.ny(), nx = sim.range.nx();
  nb::dict d;
  d["image"] = to_numpy(std::move(sim.image), {ny, nx});
  d["ivar"] = to_numpy(std::move(sim.ivar), {ny, nx});
  d["mask"] = to_numpy(std::move(sim.mask), {ny, nx});
  d["xyrange"] = tuple_of(sim.range);
  d["read_noise"] = sim.read_noise;
  return d;
}

// ---- extraction ----

sx::Ex2dOptions options_of(const nb::dict& d) {
  sx::Ex2dOptions o;
  o.bundlesize = nb::cast<int>(d["bundlesize"]);
  o.nsubbundles = nb::cast<int>(d["nsubbundles"]);
  o.wavesize = nb::cast<int>(d["wavesize"]);
  o.regularize = nb::cast<double>(d["regularize"]);
  o.ndecorr = nb::cast<bool>(d["ndecorr"]);
  o.pixpad_frac = nb::cast<double>(d["pixpad_frac"]);
  o.wavepad_frac = nb::cast<double>(d["wavepad_frac"]);
  if (d.contains("psferr") && !d["psferr"].is_none()) o.psferr = nb::cast<double>(d["psferr"]);
  o.full_output = nb::cast<bool>(d["full_output"]);
  o.nparallel = nb::cast<int>(d["nparallel"]);
  // The ranks (the communicator's Fortran handle, -1 for this process alone) and where the
  // results go on them (sciproxy.specex checks both).
  if (d.contains("comm"))
    o.comm = sciproxy::Communicator::from_handle(nb::cast<std::int64_t>(d["comm"]), "comm");
  if (d.contains("result_layout"))
    o.result_layout = static_cast<sx::ResultLayout>(nb::cast<int>(d["result_layout"]));
  if (d.contains("verbose") && nb::cast<bool>(d["verbose"])) {
    // No Python here (the GIL is released): a progress line on stderr, as specter's verbose.
    o.progress = [](void*, int done, int total) {
      std::fprintf(stderr, "\rspecex ex2d: bundle %d/%d", done, total);
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  }
  return o;
}

// None on a rank that receives no result (several ranks, the result on rank 0).
nb::object result_to_python(sx::Ex2dResult&& r, bool full_output, std::int64_t ny,
                            std::int64_t nx) {
  const std::int64_t nspec = r.nspec, nwave = r.nwave;
  if (r.flux.empty() && nspec * nwave > 0) return nb::none();
  nb::dict d;
  d["flux"] = to_numpy(std::move(r.flux), {nspec, nwave});
  d["ivar"] = to_numpy(std::move(r.ivar), {nspec, nwave});
  d["resolution_data"] = to_numpy(std::move(r.resolution), {nspec, 2 * r.ndiag + 1, nwave});
  if (full_output) {
    d["chi2pix"] = to_numpy(std::move(r.chi2pix), {nspec, nwave});
    d["pixmask_fraction"] = to_numpy(std::move(r.pixmask_fraction), {nspec, nwave});
    if (ny * nx == static_cast<std::int64_t>(r.model.size()))
      d["modelimage"] = to_numpy(std::move(r.model), {ny, nx});
    else
      d["modelimage"] = vector_to_numpy(std::move(r.model));
  }
  d["ndiag"] = r.ndiag;
  d["npatches"] = r.npatches;
  d["retried_patches"] = r.retried_patches;
  return d;
}

sx::ImageInput image_of(const Matrix& image, const Matrix& ivar, const std::optional<Range>& r) {
  sx::ImageInput in;
  in.image = span_of(image);
  in.ivar = span_of(ivar);
  in.ny = static_cast<std::int64_t>(image.shape(0));
  in.nx = static_cast<std::int64_t>(image.shape(1));
  in.range = range_of(r);
  return in;
}

nb::object ex2d(const sx::Psf& psf, const Matrix& image, const Matrix& ivar,
                const std::optional<Range>& r, int specmin, int nspec, const Vector& wavelengths,
                const nb::dict& options, const std::string& device_spec) {
  const sx::Ex2dOptions opt = options_of(options);
  const sx::ImageInput in = image_of(image, ivar, r);
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  sx::Ex2dResult result;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call between patches
    result = sx::ex2d(device, psf, in, specmin, nspec, span_of(wavelengths), opt, &timers);
  }
  nb::object out = result_to_python(std::move(result), opt.full_output, in.ny, in.nx);
  if (out.is_none()) return out;
  nb::dict d = nb::cast<nb::dict>(out);
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

// The patches ex2d would solve: [(speclo, nspec, keeplo, nkeep, iwave, ncore, nlo, nhi, wfirst,
// (xmin, xmax, ymin, ymax)), ...].
nb::list ex2d_patches(const sx::Psf& psf, const Matrix& image, const Matrix& ivar,
                      const std::optional<Range>& r, int specmin, int nspec,
                      const Vector& wavelengths, const nb::dict& options) {
  const sx::Ex2dOptions opt = options_of(options);
  std::vector<sx::PatchPlan> plans;
  {
    nb::gil_scoped_release release;
    plans =
        sx::ex2d_patches(psf, image_of(image, ivar, r), specmin, nspec, span_of(wavelengths), opt);
  }
  nb::list out;
  for (const auto& p : plans) {
    nb::dict d;
    d["speclo"] = p.speclo;
    d["nspec"] = p.nspec;
    d["keeplo"] = p.keeplo;
    d["nkeep"] = p.nkeep;
    d["iwave"] = p.iwave;
    d["ncore"] = p.ncore;
    d["nlo"] = p.nlo;
    d["nhi"] = p.nhi;
    d["wfirst"] = p.wfirst;
    d["xyrange"] = tuple_of(p.pixels);
    out.append(d);
  }
  return out;
}

nb::dict ex2d_patch(const sx::Psf& psf, const Matrix& image, const Matrix& ivar,
                    const std::optional<Range>& r, int specmin, int nspec,
                    const Vector& wavelengths, double regularize, bool ndecorr,
                    const std::string& device_spec) {
  const sx::ImageInput in = image_of(image, ivar, r);
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sx::PatchResult p;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    p = sx::ex2d_patch(device, psf, in, specmin, nspec, span_of(wavelengths), regularize, ndecorr);
  }
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.shape(0));
  const std::int64_t n = p.nflux;
  nb::dict d;
  d["flux"] = to_numpy(std::move(p.flux), {nspec, nwave});
  d["ivar"] = to_numpy(std::move(p.ivar), {nspec, nwave});
  d["xflux"] = to_numpy(std::move(p.xflux), {nspec, nwave});
  d["R"] = to_numpy(std::move(p.resolution), {n, n});
  d["iCov"] = to_numpy(std::move(p.icov), {n, n});
  d["xyrange"] = tuple_of(p.range);
  d["retried"] = p.retried;
  d["device"] = device.name();
  return d;
}

// ---- files ----

nb::dict read_preproc_image(const std::string& path) {
  sx::PreprocImage im;
  {
    nb::gil_scoped_release release;
    im = sx::read_preproc_image(path);
  }
  const std::int64_t ny = im.ny, nx = im.nx;
  nb::dict d;
  d["image"] = to_numpy(std::move(im.image), {ny, nx});
  d["ivar"] = to_numpy(std::move(im.ivar), {ny, nx});
  d["mask"] = to_numpy(std::move(im.mask), {ny, nx});
  d["camera"] = im.camera;
  d["has_fibermap"] = im.has_fibermap;
  d["path"] = im.path;
  return d;
}

void write_preproc_image(const std::string& path, const Matrix& image, const Matrix& ivar,
                         const Mask& mask, const std::string& camera) {
  sx::SimulatedImage sim;
  sim.range.xmax = static_cast<std::int64_t>(image.shape(1));
  sim.range.ymax = static_cast<std::int64_t>(image.shape(0));
  sim.image.assign(image.data(), image.data() + image.size());
  sim.ivar.assign(ivar.data(), ivar.data() + ivar.size());
  sim.mask.assign(mask.data(), mask.data() + mask.size());
  nb::gil_scoped_release release;
  sx::write_preproc_image(path, sim, camera);
}

nb::object extract_frame(const std::string& image_path, const std::string& psf_path,
                         const std::string& frame_path, const std::string& model_path,
                         const Vector& wavelengths, int specmin, int nspec, const nb::dict& options,
                         const std::string& device_spec) {
  const sx::Ex2dOptions opt = options_of(options);
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  sx::Ex2dResult result;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call between patches
    result = sx::extract_frame(device, image_path, psf_path, frame_path, model_path,
                               span_of(wavelengths), specmin, nspec, opt, &timers);
  }
  // The model image is returned flat; the Python layer gives it the image's shape.
  nb::object out = result_to_python(std::move(result), opt.full_output, 0, 0);
  if (out.is_none()) return out;
  nb::dict d = nb::cast<nb::dict>(out);
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

}  // namespace

void register_specex(nb::module_& m) {
  nb::class_<sx::Psf>(m, "SpecexPsf",
                      "A DESI Gauss-Hermite PSF (use sciproxy.specex.load_psf, not this class)")
      .def_static(
          "load",
          [](const std::string& path) {
            nb::gil_scoped_release release;
            return sx::Psf::load(path);
          },
          "path"_a)
      .def("model", &psf_model)
      .def("eval", &psf_eval, "what"_a, "ispec"_a.noconvert(), "values"_a.noconvert())
      .def("spot", &psf_spot, "ispec"_a, "wavelength"_a, "bounds"_a.none())
      .def(
          "xyrange",
          [](const sx::Psf& psf, int specmin, int specmax, double wavemin, double wavemax) {
            return tuple_of(psf.xyrange(specmin, specmax, wavemin, wavemax));
          },
          "specmin"_a, "specmax"_a, "wavemin"_a, "wavemax"_a)
      .def("projection_matrix", &psf_projection_matrix, "specmin"_a, "specmax"_a,
           "wavelengths"_a.noconvert(), "xyrange"_a);

  m.def("specex_project", &project, "psf"_a, "wavelengths"_a.noconvert(), "phot"_a.noconvert(),
        "specmin"_a, "xyrange"_a.none(), "nparallel"_a);
  m.def("specex_simulate_image", &simulate_image, "psf"_a, "wavelengths"_a.noconvert(),
        "phot"_a.noconvert(), "specmin"_a, "xyrange"_a.none(), "read_noise"_a, "seed"_a,
        "nparallel"_a);
  m.def(
      "specex_resolution_ndiag",
      [](const sx::Psf& psf, int specmin, int nspec, double dw) {
        return sx::resolution_ndiag(psf, specmin, nspec, dw);
      },
      "psf"_a, "specmin"_a, "nspec"_a, "dw"_a);
  m.def("specex_ex2d", &ex2d, "psf"_a, "image"_a.noconvert(), "ivar"_a.noconvert(),
        "xyrange"_a.none(), "specmin"_a, "nspec"_a, "wavelengths"_a.noconvert(), "options"_a,
        "device"_a);
  m.def("specex_ex2d_patches", &ex2d_patches, "psf"_a, "image"_a.noconvert(), "ivar"_a.noconvert(),
        "xyrange"_a.none(), "specmin"_a, "nspec"_a, "wavelengths"_a.noconvert(), "options"_a);
  m.def("specex_ex2d_patch", &ex2d_patch, "psf"_a, "image"_a.noconvert(), "ivar"_a.noconvert(),
        "xyrange"_a.none(), "specmin"_a, "nspec"_a, "wavelengths"_a.noconvert(), "regularize"_a,
        "ndecorr"_a, "device"_a);
  m.def("specex_read_preproc_image", &read_preproc_image, "path"_a);
  m.def("specex_write_preproc_image", &write_preproc_image, "path"_a, "image"_a.noconvert(),
        "ivar"_a.noconvert(), "mask"_a.noconvert(), "camera"_a);
  m.def("specex_extract_frame", &extract_frame, "image_path"_a, "psf_path"_a, "frame_path"_a,
        "model_path"_a, "wavelengths"_a.noconvert(), "specmin"_a, "nspec"_a, "options"_a,
        "device"_a);
  m.def(
      "specex_wavelength_grid",
      [](double wmin, double wmax, double dw) {
        return vector_to_numpy(sx::wavelength_grid(wmin, wmax, dw));
      },
      "wmin"_a, "wmax"_a, "dw"_a);
}
