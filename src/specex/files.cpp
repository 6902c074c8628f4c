// specex's files (FITS, through cfitsio): the preprocessed image an extraction reads, the frame
// and the model image it writes, and gpu_specter's extract_frame over them.
//
// The layouts are DESI's (desispec.io.image, desispec.io.frame). Every file is written under a
// temporary name in its directory and renamed when complete, so a failed or interrupted write
// never leaves a half-written file at the path (an older file there stays untouched).
#include <fitsio.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::specex {

namespace {

namespace fs = std::filesystem;

// desispec's spectral pixel mask (desispec/py/desispec/maskbits.py, specmask): SOMEBADPIX bit 0
// "Some input pixels were masked or ivar=0", ALLBADPIX bit 1 "All input pixels were masked or
// ivar=0", BAD2DFIT bit 7 "Bad fit of extraction 2D model to pixel data".
constexpr std::int32_t kSomeBadPix = 1 << 0;
constexpr std::int32_t kAllBadPix = 1 << 1;
constexpr std::int32_t kBad2dFit = 1 << 7;
// desispec/py/desispec/scripts/extract.py (and gpu_specter's spex) set the mask as
//   mask[pixmask_fraction > 0.5] |= SOMEBADPIX; mask[pixmask_fraction == 1.0] |= ALLBADPIX;
//   mask[chi2pix > 100.0] |= BAD2DFIT
// a fixed chi2pix threshold, not one relative to a median.
constexpr double kBad2dFitChi2pix = 100.0;

std::string fits_message(int status) {
  const int error = errno;  // what the system said, for the statuses that come from it
  char text[FLEN_STATUS] = {};
  fits_get_errstatus(status, text);
  // The detail cfitsio stacked (the first line is the most specific); cleared either way.
  char detail[FLEN_ERRMSG] = {};
  std::string first;
  while (fits_read_errmsg(detail)) {
    if (first.empty()) first = detail;
  }
  std::string m = text;
  if ((status == FILE_NOT_CREATED || status == WRITE_ERROR || status == FILE_NOT_OPENED ||
       status == READ_ERROR) &&
      error != 0)
    return m + fmt::format(" ({})", std::strerror(error));
  while (!first.empty() && (first.back() == ':' || first.back() == ' ')) first.pop_back();
  if (!first.empty() && first != m) m += fmt::format(" ({})", first);
  return m;
}

// An open FITS file for reading: closed when it goes out of scope.
class FitsReader {
 public:
  // what: "image", "PSF", ... (the argument the errors name).
  FitsReader(const std::string& path, const std::string& what) : path_(path), what_(what) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw_invalid_argument(what_, "an existing FITS file",
                             fmt::format("'{}' (no such file)", path));
    if (fs::is_directory(path, ec))
      throw_invalid_argument(what_, "a FITS file", fmt::format("'{}', which is a directory", path));
    int status = 0;
    // The disk file as named: no cfitsio extended-name syntax ("file.fits[1]").
    if (fits_open_diskfile(&f_, path.c_str(), READONLY, &status)) {
      f_ = nullptr;
      char text[FLEN_STATUS] = {};
      fits_get_errstatus(status, text);
      fits_clear_errmsg();
      if (access(path.c_str(), R_OK) != 0)
        throw IoError(fmt::format("{}: could not read '{}' (permission denied)", what_, path));
      throw_invalid_argument(what_, "a FITS file",
                             fmt::format("'{}', which is not one (cfitsio: {})", path, text));
    }
  }
  ~FitsReader() {
    int status = 0;
    if (f_) fits_close_file(f_, &status);
  }
  FitsReader(const FitsReader&) = delete;
  FitsReader& operator=(const FitsReader&) = delete;

  fitsfile* get() const { return f_; }
  const std::string& path() const { return path_; }

  bool has_hdu(const char* extname, int hdutype = ANY_HDU) {
    int status = 0;
    if (fits_movnam_hdu(f_, hdutype, const_cast<char*>(extname), 0, &status) == 0) return true;
    fits_clear_errmsg();
    return false;
  }
  void move_to(const char* extname, int hdutype = ANY_HDU) {
    if (!has_hdu(extname, hdutype))
      throw_invalid_argument(what_, fmt::format("a FITS file with a {} HDU", extname),
                             fmt::format("'{}', which has none", path_));
  }

  // The current HDU as a 2-D image (ny, nx) of doubles.
  std::vector<double> read_image(const char* extname, std::int64_t& ny, std::int64_t& nx) {
    int status = 0, bitpix = 0, naxis = 0;
    LONGLONG naxes[3] = {0, 0, 0};
    fits_get_img_paramll(f_, 3, &bitpix, &naxis, naxes, &status);
    check(status, extname);
    if (naxis != 2)
      throw_invalid_argument(fmt::format("{} HDU of '{}'", extname, path_), "a 2-D image",
                             fmt::format("{} axes", naxis));
    nx = naxes[0];
    ny = naxes[1];
    std::vector<double> v(static_cast<std::size_t>(nx * ny));
    int anynul = 0;
    if (!v.empty()) {
      double nulval = 0;  // no null substitution: NaN comes through as NaN
      fits_read_img(f_, TDOUBLE, 1, static_cast<LONGLONG>(v.size()), &nulval, v.data(), &anynul,
                    &status);
      check(status, extname);
    }
    return v;
  }

  std::string read_string_key(const char* key) {
    int status = 0;
    char value[FLEN_VALUE] = {};
    if (fits_read_key(f_, TSTRING, key, value, nullptr, &status)) {
      fits_clear_errmsg();
      return "";
    }
    std::string s = value;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  }

  void check(int status, const char* where) const {
    if (status)
      throw IoError(fmt::format("{}: could not read the {} HDU of '{}': {}", what_, where, path_,
                                fits_message(status)));
  }

 private:
  std::string path_, what_;
  fitsfile* f_ = nullptr;
};

// A FITS file written under a temporary name in the target's directory and renamed onto the
// target by commit(); destroyed before commit (an error, a cancellation), it removes the
// temporary and leaves the target as it was.
class AtomicFitsWriter {
 public:
  AtomicFitsWriter(const std::string& path, const std::string& what) : path_(path), what_(what) {
    if (path.empty()) throw_invalid_argument(what_, "a file name", "an empty string");
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (fs::is_directory(target, ec))
      throw_invalid_argument(what_, "a file name", fmt::format("'{}', which is a directory", path));
    if (!fs::is_directory(dir, ec))
      throw IoError(fmt::format("{}: cannot write '{}': the directory '{}' does not exist", what_,
                                path, dir.string()));
    static std::atomic<unsigned> counter{0};
    tmp_ = dir / fmt::format(".{}.tmp{}.{}", target.filename().string(), getpid(), counter++);
    fs::remove(tmp_, ec);
    int status = 0;
    errno = 0;
    if (fits_create_diskfile(&f_, tmp_.c_str(), &status)) {
      f_ = nullptr;
      const std::string m = fits_message(status);
      fs::remove(tmp_, ec);
      throw IoError(
          fmt::format("{}: cannot write '{}': {}", what_, path,
                      access(dir.c_str(), W_OK) != 0
                          ? fmt::format("the directory '{}' is not writable", dir.string())
                          : "could not create a file in '" + dir.string() + "': " + m));
    }
  }
  ~AtomicFitsWriter() {
    if (committed_) return;
    int status = 0;
    if (f_) fits_close_file(f_, &status);
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
  AtomicFitsWriter(const AtomicFitsWriter&) = delete;
  AtomicFitsWriter& operator=(const AtomicFitsWriter&) = delete;

  fitsfile* get() const { return f_; }

  void check(int status, std::string_view doing) const {
    if (status)
      throw IoError(fmt::format("{}: could not write '{}' ({}): {}", what_, path_, doing,
                                fits_message(status)));
  }

  // A new image HDU named extname holding data (axes fastest first, FITS order), converted to
  // the file's type `bitpix` through the cfitsio type `datatype` of `data`.
  template <class T>
  void image(const char* extname, int bitpix, int datatype, const std::vector<LONGLONG>& axes,
             const T* data) {
    int status = 0;
    std::vector<LONGLONG> a = axes;
    fits_create_imgll(f_, bitpix, static_cast<int>(a.size()), a.data(), &status);
    check(status, fmt::format("creating the {} HDU", extname));
    key_string("EXTNAME", extname, nullptr);
    LONGLONG n = 1;
    for (auto x : axes) n *= x;
    if (n > 0) {
      errno = 0;
      fits_write_img(f_, datatype, 1, n, const_cast<T*>(data), &status);
      check(status, fmt::format("the data of the {} HDU", extname));
    }
  }

  void key_string(const char* key, const std::string& value, const char* comment) {
    int status = 0;
    if (value.size() <= 68) {
      fits_update_key(f_, TSTRING, key, const_cast<char*>(value.c_str()), comment, &status);
    } else {  // the CONTINUE convention (astropy and fitsio read it)
      fits_update_key_longstr(f_, key, value.c_str(), comment, &status);
    }
    check(status, fmt::format("the {} header card", key));
  }
  void key_long(const char* key, long long value, const char* comment) {
    int status = 0;
    fits_update_key(f_, TLONGLONG, key, &value, comment, &status);
    check(status, fmt::format("the {} header card", key));
  }
  void key_double(const char* key, double value, const char* comment) {
    int status = 0;
    fits_update_key_dbl(f_, key, value, -15, comment, &status);
    check(status, fmt::format("the {} header card", key));
  }

  void commit() {
    int status = 0;
    errno = 0;
    fits_close_file(f_, &status);
    f_ = nullptr;
    check(status, "closing it");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec)
      throw IoError(fmt::format("{}: could not write '{}' (renaming the temporary file: {})", what_,
                                path_, ec.message()));
    committed_ = true;
  }

 private:
  std::string path_, what_;
  fs::path tmp_;
  fitsfile* f_ = nullptr;
  bool committed_ = false;
};

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> f(v.size());
  std::transform(v.begin(), v.end(), f.begin(), [](double x) { return static_cast<float>(x); });
  return f;
}

// Lossless tile compression (GZIP_2, no quantisation) for the next image HDU: a preprocessed
// image is mostly zeros outside the simulated pixels, and DESI compresses its preproc files too.
void compress_next(AtomicFitsWriter& w) {
  int status = 0;
  fits_set_compression_type(w.get(), GZIP_2, &status);
  fits_set_quantize_level(w.get(), 0.0, &status);
  w.check(status, "setting the compression");
}

}  // namespace

PreprocImage read_preproc_image(const std::string& path) {
  FitsReader f(path, "image");
  PreprocImage out;
  out.path = path;
  f.move_to("IMAGE");
  out.camera = f.read_string_key("CAMERA");
  out.image = f.read_image("IMAGE", out.ny, out.nx);
  std::int64_t ny = 0, nx = 0;
  f.move_to("IVAR");
  out.ivar = f.read_image("IVAR", ny, nx);
  if (ny != out.ny || nx != out.nx)
    throw_invalid_argument(fmt::format("IVAR HDU of '{}'", path),
                           fmt::format("the IMAGE's shape {} x {}", out.ny, out.nx),
                           fmt::format("{} x {}", ny, nx));
  f.move_to("MASK");
  const std::vector<double> mask = f.read_image("MASK", ny, nx);
  if (ny != out.ny || nx != out.nx)
    throw_invalid_argument(fmt::format("MASK HDU of '{}'", path),
                           fmt::format("the IMAGE's shape {} x {}", out.ny, out.nx),
                           fmt::format("{} x {}", ny, nx));
  out.has_fibermap = f.has_hdu("FIBERMAP", BINARY_TBL);

  // Pixels: finite image values, finite non-negative ivar.
  std::int64_t nan_count = 0, nan_first = -1, bad_ivar = 0, bad_ivar_first = -1;
  const auto n = static_cast<std::int64_t>(out.image.size());
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(out.image[i])) {
      if (nan_count++ == 0) nan_first = i;
    }
    if (!(out.ivar[i] >= 0) || !std::isfinite(out.ivar[i])) {
      if (bad_ivar++ == 0) bad_ivar_first = i;
    }
  }
  if (nan_count > 0)
    throw_invalid_argument(
        fmt::format("IMAGE HDU of '{}'", path), "finite pixel values",
        fmt::format("{} NaN or infinite value{}, the first {} at row {}, column {}", nan_count,
                    nan_count == 1 ? "" : "s", out.image[nan_first], nan_first / out.nx,
                    nan_first % out.nx));
  if (bad_ivar > 0)
    throw_invalid_argument(
        fmt::format("IVAR HDU of '{}'", path), "finite values >= 0",
        fmt::format("{} negative or non-finite value{}, the first {} at row {}, column {}",
                    bad_ivar, bad_ivar == 1 ? "" : "s", out.ivar[bad_ivar_first],
                    bad_ivar_first / out.nx, bad_ivar_first % out.nx));

  out.mask.resize(mask.size());
  for (std::size_t i = 0; i < mask.size(); ++i) {
    const double m = mask[i];
    // desispec's ccdmask bits (0-6) fit in int16; a wider value keeps being non-zero.
    out.mask[i] = m >= -32768 && m <= 32767 ? static_cast<std::int16_t>(m)
                                            : std::numeric_limits<std::int16_t>::max();
    if (m != 0) out.ivar[i] = 0;
  }
  return out;
}

void write_preproc_image(const std::string& path, const SimulatedImage& image,
                         const std::string& camera) {
  const std::int64_t ny = image.range.ny(), nx = image.range.nx();
  require(ny >= 1 && nx >= 1, "image.range", "at least one pixel", fmt::format("{} x {}", ny, nx));
  const auto n = static_cast<std::size_t>(ny * nx);
  require(image.image.size() == n, "image.image", fmt::format("{} values ({} x {})", n, ny, nx),
          std::to_string(image.image.size()));
  require(image.ivar.size() == n, "image.ivar", fmt::format("{} values", n),
          std::to_string(image.ivar.size()));
  require(image.mask.empty() || image.mask.size() == n, "image.mask",
          fmt::format("{} values or none", n), std::to_string(image.mask.size()));

  AtomicFitsWriter w(path, "image");
  // An empty primary HDU: compressed images live in extensions (desispec's layout is the same
  // when it compresses).
  int status = 0;
  fits_create_img(w.get(), BYTE_IMG, 0, nullptr, &status);
  w.check(status, "the primary HDU");
  const std::vector<LONGLONG> axes{nx, ny};
  const std::vector<float> img = to_float(image.image);
  compress_next(w);
  w.image("IMAGE", FLOAT_IMG, TFLOAT, axes, img.data());
  w.key_string("CAMERA", camera, "Spectrograph camera");
  for (const char* amp : {"RDNOISEA", "RDNOISEB", "RDNOISEC", "RDNOISED"})
    w.key_double(amp, image.read_noise, "Read noise [electrons]");
  w.key_string("BUNIT", "electron", nullptr);
  // Where the pixels are on the CCD (informative: a simulated cut-out starts at XMIN, YMIN).
  w.key_long("XMIN", image.range.xmin, "First CCD column of the image");
  w.key_long("YMIN", image.range.ymin, "First CCD row of the image");
  const std::vector<float> ivar = to_float(image.ivar);
  compress_next(w);
  w.image("IVAR", FLOAT_IMG, TFLOAT, axes, ivar.data());
  w.key_string("BUNIT", "electron-2", nullptr);
  std::vector<std::int16_t> mask = image.mask;
  if (mask.empty()) mask.assign(n, 0);
  compress_next(w);
  w.image("MASK", SHORT_IMG, TSHORT, axes, mask.data());
  w.commit();
}

void write_frame(const std::string& path, const Ex2dResult& result, const FrameInfo& info) {
  const std::int64_t nspec = result.nspec, nwave = result.nwave;
  require(nspec >= 1 && nwave >= 1, "result", "an extraction of at least one bin",
          fmt::format("{} spectra x {} wavelengths", nspec, nwave));
  const auto n = static_cast<std::size_t>(nspec * nwave);
  require(result.flux.size() == n && result.ivar.size() == n, "result.flux, result.ivar",
          fmt::format("{} values each", n),
          fmt::format("{} and {}", result.flux.size(), result.ivar.size()));
  const std::int64_t nband = 2 * std::int64_t(result.ndiag) + 1;
  require(result.ndiag >= 0 && result.resolution.size() == n * static_cast<std::size_t>(nband),
          "result.resolution", fmt::format("{} values (nspec x {} x nwave)", n * nband, nband),
          std::to_string(result.resolution.size()));
  require(result.chi2pix.empty() || result.chi2pix.size() == n, "result.chi2pix",
          fmt::format("{} values or none", n), std::to_string(result.chi2pix.size()));
  require(result.pixmask_fraction.empty() || result.pixmask_fraction.size() == n,
          "result.pixmask_fraction", fmt::format("{} values or none", n),
          std::to_string(result.pixmask_fraction.size()));
  require(static_cast<std::int64_t>(info.wavelengths.size()) == nwave, "info.wavelengths",
          fmt::format("{} wavelengths (the extraction's)", nwave),
          std::to_string(info.wavelengths.size()));
  require(info.specmin >= 0, "info.specmin", "a fibre >= 0", std::to_string(info.specmin));

  // The mask, as desispec's extract sets it (see kSomeBadPix above).
  std::vector<std::int32_t> mask(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (!result.pixmask_fraction.empty()) {
      if (result.pixmask_fraction[i] > 0.5) mask[i] |= kSomeBadPix;
      if (result.pixmask_fraction[i] == 1.0) mask[i] |= kAllBadPix;
    }
    if (!result.chi2pix.empty() && result.chi2pix[i] > kBad2dFitChi2pix) mask[i] |= kBad2dFit;
  }

  // The fibermap first, so a bad source fails before anything is written.
  std::unique_ptr<FitsReader> fibermap;
  LONGLONG fibermap_rows = 0;
  if (!info.fibermap_source.empty()) {
    fibermap = std::make_unique<FitsReader>(info.fibermap_source, "info.fibermap_source");
    fibermap->move_to("FIBERMAP", BINARY_TBL);
    int status = 0;
    fits_get_num_rowsll(fibermap->get(), &fibermap_rows, &status);
    fibermap->check(status, "FIBERMAP");
    if (fibermap_rows < info.specmin + nspec)
      throw_invalid_argument(
          fmt::format("FIBERMAP HDU of '{}'", info.fibermap_source),
          fmt::format("at least specmin + nspec = {} rows", info.specmin + nspec),
          std::to_string(fibermap_rows));
  }

  AtomicFitsWriter w(path, "frame");
  const std::vector<LONGLONG> axes{nwave, nspec};
  const std::vector<float> flux = to_float(result.flux);
  w.image("FLUX", FLOAT_IMG, TFLOAT, axes, flux.data());
  w.key_string("BUNIT", "electron/Angstrom", "Flux units");
  w.key_long("SPECMIN", info.specmin, "First spectrum");
  w.key_long("NSPEC", nspec, "Number of spectra");
  if (!info.camera.empty()) w.key_string("CAMERA", info.camera, "Spectrograph camera");
  w.key_double("WAVEMIN", info.wavelengths.front(), "First wavelength [Angstroms]");
  w.key_double("WAVEMAX", info.wavelengths.back(), "Last wavelength [Angstroms]");
  if (nwave > 1)
    w.key_double("WAVESTEP", info.wavelengths[1] - info.wavelengths[0],
                 "Wavelength step size [Angstroms]");
  w.key_long("NDIAG", result.ndiag, "Resolution half-width [wavelength bins]");
  if (!info.psf_path.empty()) w.key_string("IN_PSF", info.psf_path, "Input spectral PSF");
  if (!info.image_path.empty()) w.key_string("IN_IMG", info.image_path, "Input image");
  w.key_string("EXTRACT", "sciproxy specex", "Extraction code");

  const std::vector<float> ivar = to_float(result.ivar);
  w.image("IVAR", FLOAT_IMG, TFLOAT, axes, ivar.data());
  w.key_string("BUNIT", "Angstrom2/electron2", nullptr);
  w.image("MASK", LONG_IMG, TINT, axes, mask.data());
  w.image("WAVELENGTH", DOUBLE_IMG, TDOUBLE, {nwave}, info.wavelengths.data());
  w.key_string("BUNIT", "Angstrom", nullptr);
  const std::vector<float> resolution = to_float(result.resolution);
  w.image("RESOLUTION", FLOAT_IMG, TFLOAT, {nwave, nband, nspec}, resolution.data());
  if (fibermap) {
    int status = 0;
    fits_copy_hdu(fibermap->get(), w.get(), 0, &status);
    w.check(status, "copying the FIBERMAP HDU");
    // desispec keeps the rows of the extracted fibres: fibermap[specmin:specmin + nspec].
    const LONGLONG keep_end = info.specmin + nspec;
    if (fibermap_rows > keep_end)
      fits_delete_rows(w.get(), keep_end + 1, fibermap_rows - keep_end, &status);
    if (info.specmin > 0) fits_delete_rows(w.get(), 1, info.specmin, &status);
    w.check(status, "selecting the FIBERMAP rows");
  }
  if (!result.chi2pix.empty()) {
    const std::vector<float> chi2pix = to_float(result.chi2pix);
    w.image("CHI2PIX", FLOAT_IMG, TFLOAT, axes, chi2pix.data());
  }
  w.commit();
}

void write_model_image(const std::string& path, const Ex2dResult& result, std::int64_t ny,
                       std::int64_t nx) {
  require(ny >= 1 && nx >= 1, "ny, nx", "a shape of at least one pixel",
          fmt::format("{} x {}", ny, nx));
  require(result.model.size() == static_cast<std::size_t>(ny * nx), "result.model",
          fmt::format("{} values ({} x {}; an extraction with full_output)", ny * nx, ny, nx),
          std::to_string(result.model.size()));
  AtomicFitsWriter w(path, "model");
  const std::vector<float> model = to_float(result.model);
  // Compressed without loss (a model is mostly zeros away from the extracted spectra), after an
  // empty primary HDU as compressed images need.
  int status = 0;
  fits_create_img(w.get(), BYTE_IMG, 0, nullptr, &status);
  w.check(status, "the primary HDU");
  compress_next(w);
  w.image("IMAGE", FLOAT_IMG, TFLOAT, {nx, ny}, model.data());
  w.key_string("BUNIT", "electron", nullptr);
  w.commit();
}

Ex2dResult extract_frame(const Device& device, const std::string& image_path,
                         const std::string& psf_path, const std::string& frame_path,
                         const std::string& model_path, std::span<const double> wavelengths,
                         int specmin, int nspec, const Ex2dOptions& options, Timers* timers) {
  // On several ranks every rank reads the files and extracts its bundles (ex2d checks that the
  // ranks agree), and rank 0 alone writes; any rank's error is every rank's.
  const Communicator& comm = options.comm;
  const bool writer = comm.rank() == 0;
  PreprocImage image;
  std::optional<Psf> psf;
  collective::on_every_rank(comm, [&] {
    // The outputs' directories first, so a typo does not cost an extraction.
    for (const auto& [p, what] : {std::pair{frame_path, "frame"}, std::pair{model_path, "model"}}) {
      if (p.empty()) {
        if (std::string_view(what) == "frame")
          throw_invalid_argument("frame_path", "a file name", "an empty string");
        continue;
      }
      if (!writer) continue;
      const fs::path target(p);
      const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
      std::error_code ec;
      if (!fs::is_directory(dir, ec))
        throw IoError(fmt::format("{}: cannot write '{}': the directory '{}' does not exist", what,
                                  p, dir.string()));
      if (access(dir.c_str(), W_OK) != 0)
        throw IoError(fmt::format("{}: cannot write '{}': the directory '{}' is not writable", what,
                                  p, dir.string()));
    }
    {
      auto t = Timers::region(timers, "read image");
      image = read_preproc_image(image_path);
    }
    {
      auto t = Timers::region(timers, "read psf");
      psf = Psf::load(psf_path);
    }
    if (image.ny != psf->npix_y() || image.nx != psf->npix_x())
      throw_invalid_argument("image",
                             fmt::format("the PSF's CCD shape {} x {} (rows x columns, {})",
                                         psf->npix_y(), psf->npix_x(), psf_path),
                             fmt::format("{} x {} in '{}'", image.ny, image.nx, image_path));
  });
  ImageInput input;
  input.image = image.image;
  input.ivar = image.ivar;
  input.ny = image.ny;
  input.nx = image.nx;
  Ex2dOptions opt = options;
  if (!model_path.empty()) opt.full_output = true;
  Ex2dResult result = ex2d(device, *psf, input, specmin, nspec, wavelengths, opt, timers);
  // The whole result is on rank 0 now: every rank's part has arrived.
  collective::on_every_rank(comm, [&] {
    if (!writer) return;
    auto t = Timers::region(timers, "write frame");
    FrameInfo info;
    info.wavelengths.assign(wavelengths.begin(), wavelengths.end());
    info.specmin = specmin;
    info.camera = image.camera;
    if (image.has_fibermap) info.fibermap_source = image_path;
    info.psf_path = psf_path;
    info.image_path = image_path;
    write_frame(frame_path, result, info);
    if (!model_path.empty()) write_model_image(model_path, result, image.ny, image.nx);
  });
  return result;
}

}  // namespace sciproxy::specex
