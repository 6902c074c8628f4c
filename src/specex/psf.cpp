// The DESI Gauss-Hermite PSF: reading its FITS file (cfitsio) and evaluating traces, spots, pixel
// ranges and projections with specter's semantics (specter.psf.gausshermite, specter.psf.psf and
// specter.util.traceset at b8490d38; docs/kernels/specex.md). The spot arithmetic itself is in
// math.hpp, shared with the kernels.
#include <fitsio.h>
#include <fmt/format.h>
#include <lapacke.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel_region.hpp"
#include "kernels.hpp"
#include "math.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::specex {

double LegendreSet::eval(int ispec, double t) const {
  return legendre_sum(coeff.data() + static_cast<std::int64_t>(ispec) * ncoeff, ncoeff,
                      legendre_argument(t, lo, hi));
}

namespace {

// An open FITS file whose errors name the file: "psf-r0.fits: HDU 'YTRACE': ...".
class FitsReader {
 public:
  FitsReader(const std::string& path, std::string what) : path_(path), what_(std::move(what)) {
    int status = 0;
    if (fits_open_file(&file_, path.c_str(), READONLY, &status))
      fail(status, fmt::format("cannot be read as FITS (a {} is a FITS file)", what_));
  }
  ~FitsReader() {
    int status = 0;
    if (file_) fits_close_file(file_, &status);
  }
  FitsReader(const FitsReader&) = delete;
  FitsReader& operator=(const FitsReader&) = delete;

  [[noreturn]] void fail(int status, const std::string& what) const {
    std::string detail;
    if (status) {
      char text[FLEN_STATUS] = {};
      fits_get_errstatus(status, text);
      detail = fmt::format(" (cfitsio: {})", text);
      fits_clear_errmsg();
    }
    throw InvalidArgument(fmt::format("{}: {}{}", path_, what, detail));
  }

  bool has_hdu(const std::string& name) {
    int status = 0;
    fits_movnam_hdu(file_, ANY_HDU, const_cast<char*>(name.c_str()), 0, &status);
    if (status) fits_clear_errmsg();
    return status == 0;
  }
  void move_to(const std::string& name, const std::string& why) {
    int status = 0;
    if (fits_movnam_hdu(file_, ANY_HDU, const_cast<char*>(name.c_str()), 0, &status))
      fail(0, fmt::format("has no HDU '{}' ({})", name, why));
    hdu_ = name;
  }
  void move_to_number(int number, const std::string& name) {  // 1: primary
    int status = 0, type = 0;
    if (fits_movabs_hdu(file_, number, &type, &status))
      fail(status, fmt::format("has no {} HDU", name));
    hdu_ = name;
  }

  bool has_key(const char* key) {
    char value[FLEN_VALUE] = {};
    int status = 0;
    fits_read_keyword(file_, key, value, nullptr, &status);
    if (status) fits_clear_errmsg();
    return status == 0;
  }
  std::string string_key(const char* key) {
    char value[FLEN_VALUE] = {};
    int status = 0;
    if (fits_read_key(file_, TSTRING, key, value, nullptr, &status))
      fail(0, fmt::format("HDU {}: missing keyword {}", hdu_, key));
    return value;
  }
  double real_key(const char* key) {
    double value = 0;
    int status = 0;
    if (fits_read_key(file_, TDOUBLE, key, &value, nullptr, &status))
      fail(status, fmt::format("HDU {}: keyword {} missing or not a number", hdu_, key));
    if (!std::isfinite(value))
      fail(0, fmt::format("HDU {}: keyword {} is {}, expected a finite number", hdu_, key, value));
    return value;
  }
  long long int_key(const char* key) {
    const double v = real_key(key);
    if (v != std::floor(v))
      fail(0, fmt::format("HDU {}: keyword {} is {}, expected an integer", hdu_, key, v));
    return static_cast<long long>(v);
  }

  // A 2-D float image (naxis2 rows of naxis1 values): Legendre coefficients per fibre.
  std::vector<double> image(long& rows, long& cols) {
    int status = 0, naxis = 0;
    long naxes[2] = {0, 0};
    fits_get_img_dim(file_, &naxis, &status);
    if (status || naxis != 2)
      fail(status, fmt::format("HDU {}: expected a 2-D image of coefficients (fibres x degree + "
                               "1), got {} axes",
                               hdu_, naxis));
    fits_get_img_size(file_, 2, naxes, &status);
    cols = naxes[0];
    rows = naxes[1];
    std::vector<double> v(static_cast<std::size_t>(rows * cols));
    int anynul = 0;
    if (fits_read_img(file_, TDOUBLE, 1, rows * cols, nullptr, v.data(), &anynul, &status))
      fail(status, fmt::format("HDU {}: cannot read the image", hdu_));
    return v;
  }

  long table_rows() {
    long rows = 0;
    int status = 0;
    if (fits_get_num_rows(file_, &rows, &status))
      fail(status, fmt::format("HDU {}: not a table", hdu_));
    return rows;
  }
  int column(const char* name) {
    int col = 0, status = 0;
    if (fits_get_colnum(file_, CASEINSEN, const_cast<char*>(name), &col, &status))
      fail(0, fmt::format("HDU {}: missing column {}", hdu_, name));
    return col;
  }
  long repeat(int col) {
    int type = 0, status = 0;
    long repeat = 0, width = 0;
    fits_get_coltype(file_, col, &type, &repeat, &width, &status);
    return repeat;
  }
  std::vector<double> doubles(int col, long row, long count) {
    std::vector<double> v(static_cast<std::size_t>(count));
    int status = 0, anynul = 0;
    if (fits_read_col(file_, TDOUBLE, col, row, 1, count, nullptr, v.data(), &anynul, &status))
      fail(status, fmt::format("HDU {}: cannot read column {} row {}", hdu_, col, row));
    return v;
  }
  std::string text(int col, long row) {
    char buffer[256] = {};
    char* p = buffer;
    int status = 0, anynul = 0;
    if (fits_read_col_str(file_, col, row, 1, 1, nullptr, &p, &anynul, &status))
      fail(status, fmt::format("HDU {}: cannot read column {} row {}", hdu_, col, row));
    std::string s(buffer);
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_, what_, hdu_ = "primary";
  fitsfile* file_ = nullptr;
};

std::string gh_name(int i, int j) {
  return fmt::format("GH-{}-{}", i, j);
}

// The table of parameters: name -> (nspec x ncoeff) coefficients.
struct ParamTable {
  std::map<std::string, std::vector<double>> rows;
  std::map<std::string, std::pair<double, double>> domains;  // PSFVER 2: per-row WAVEMIN/MAX
  std::vector<std::string> order;
  int ncoeff = 0;
};

ParamTable read_params(FitsReader& f, int nspec, bool per_row_domain) {
  ParamTable t;
  const long rows = f.table_rows();
  const int param_col = f.column("PARAM"), coeff_col = f.column("COEFF");
  const long repeat = f.repeat(coeff_col);
  if (repeat <= 0 || repeat % nspec != 0)
    f.fail(0, fmt::format("column COEFF holds {} values per parameter, expected a multiple of the "
                          "{} fibres (FIBERMAX - FIBERMIN + 1)",
                          repeat, nspec));
  t.ncoeff = static_cast<int>(repeat / nspec);
  int wmin_col = 0, wmax_col = 0;
  if (per_row_domain) {
    wmin_col = f.column("WAVEMIN");
    wmax_col = f.column("WAVEMAX");
  }
  for (long r = 1; r <= rows; ++r) {
    const std::string name = f.text(param_col, r);
    t.rows[name] = f.doubles(coeff_col, r, repeat);
    t.order.push_back(name);
    if (per_row_domain)
      t.domains[name] = {f.doubles(wmin_col, r, 1)[0], f.doubles(wmax_col, r, 1)[0]};
  }
  return t;
}

void require_finite(const FitsReader& f, const std::string& what, const std::vector<double>& v) {
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]))
      f.fail(0, fmt::format("{} has a non-finite coefficient ({} at index {})", what, v[k], k));
}

// specter's TraceSet.invert: lambda(y) as a Legendre fit of degree ncoeff + 2 to 1000 samples of
// y(lambda) per fibre, on the domain [min y, max y] over fibres at the ends of lambda's domain.
// numpy's legfit scales the Vandermonde columns to unit norm and solves by least squares; so
// does this (LAPACK's QR least squares).
LegendreSet invert(const LegendreSet& y) {
  constexpr int kSamples = 1000;
  LegendreSet w;
  double ymin = std::numeric_limits<double>::infinity(), ymax = -ymin;
  for (int i = 0; i < y.nspec; ++i)
    for (const double t : {y.lo, y.hi}) {
      ymin = std::min(ymin, y.eval(i, t));
      ymax = std::max(ymax, y.eval(i, t));
    }
  const int deg = y.ncoeff + 2, n = deg + 1;
  w.lo = ymin;
  w.hi = ymax;
  w.nspec = y.nspec;
  w.ncoeff = n;
  w.coeff.assign(static_cast<std::size_t>(y.nspec) * n, 0);
  std::vector<double> lambda(kSamples);
  for (int s = 0; s < kSamples; ++s)  // numpy.linspace
    lambda[s] = s == kSamples - 1 ? y.hi : y.lo + s * ((y.hi - y.lo) / (kSamples - 1));
  std::vector<double> v(static_cast<std::size_t>(kSamples) * n), rhs(kSamples), scale(n);
  for (int i = 0; i < y.nspec; ++i) {
    for (int s = 0; s < kSamples; ++s) {
      const double u = (y.eval(i, lambda[s]) - ymin) * (2.0 / (ymax - ymin)) - 1.0;
      double p0 = 1, p1 = u;
      v[s * n] = 1;
      if (n > 1) v[s * n + 1] = u;
      for (int k = 2; k < n; ++k) {
        const double p2 = ((2 * k - 1) * u * p1 - (k - 1) * p0) / k;
        v[s * n + k] = p2;
        p0 = p1;
        p1 = p2;
      }
      rhs[s] = lambda[s];
    }
    for (int k = 0; k < n; ++k) {
      double sum = 0;
      for (int s = 0; s < kSamples; ++s) sum += v[s * n + k] * v[s * n + k];
      scale[k] = std::sqrt(sum);
      for (int s = 0; s < kSamples; ++s) v[s * n + k] /= scale[k];
    }
    const lapack_int info =
        LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', kSamples, n, 1, v.data(), n, rhs.data(), 1);
    if (info != 0)
      throw InvalidArgument(
          fmt::format("psf: the trace y(lambda) of fibre {} cannot be inverted (LAPACK dgels "
                      "info {})",
                      i, info));
    for (int k = 0; k < n; ++k) w.coeff[static_cast<std::size_t>(i) * n + k] = rhs[k] / scale[k];
  }
  return w;
}

PsfModel read_model(const std::string& path) {
  FitsReader f(path, "PSF");
  PsfModel m;
  m.path = path;
  // specter: PSFTYPE and PSFVER in the primary header; PSFVER < 3 keeps everything in HDU 1.
  const std::string type = f.string_key("PSFTYPE");
  if (type != "GAUSS-HERMITE")
    f.fail(0, fmt::format("PSFTYPE is '{}', expected 'GAUSS-HERMITE' (the only PSF type sciproxy "
                          "reads)",
                          type));
  const std::string version_text = f.string_key("PSFVER");
  char* end = nullptr;
  const double version = std::strtod(version_text.c_str(), &end);
  if (end == version_text.c_str())
    f.fail(0, fmt::format("PSFVER is '{}', expected a number", version_text));
  if (version < 2)
    f.fail(0, fmt::format("PSFVER is {}, expected 2 or 3 (older Gauss-Hermite PSFs are not "
                          "supported)",
                          version_text));
  m.version = version < 3 ? 2 : 3;
  if (m.version == 3)
    f.move_to("PSF", "a PSFVER 3 Gauss-Hermite PSF has XTRACE, YTRACE and PSF HDUs");
  else
    f.move_to_number(2, "parameter table (HDU 1)");
  m.npix_x = f.int_key("NPIX_X");
  m.npix_y = f.int_key("NPIX_Y");
  m.hsizex = static_cast<int>(f.int_key("HSIZEX"));
  m.hsizey = static_cast<int>(f.int_key("HSIZEY"));
  m.ghdegx = static_cast<int>(f.int_key("GHDEGX"));
  m.ghdegy = static_cast<int>(f.int_key("GHDEGY"));
  const long long fibermin = f.int_key("FIBERMIN"), fibermax = f.int_key("FIBERMAX");
  if (f.has_key("PSFERR")) m.psferr = f.real_key("PSFERR");
  if (m.npix_x < 1 || m.npix_y < 1)
    f.fail(0,
           fmt::format("NPIX_X, NPIX_Y are {}, {}, expected positive sizes", m.npix_x, m.npix_y));
  if (fibermax < fibermin)
    f.fail(0, fmt::format("FIBERMAX {} is below FIBERMIN {}", fibermax, fibermin));
  m.nspec = static_cast<int>(fibermax - fibermin + 1);
  if (m.hsizex < 0 || m.hsizey < 0 || 2 * std::max(m.hsizex, m.hsizey) + 2 > kMaxSpotSide)
    f.fail(0, fmt::format("HSIZEX, HSIZEY are {}, {}, expected 0 to {}", m.hsizex, m.hsizey,
                          (kMaxSpotSide - 2) / 2));
  if (m.ghdegx < 0 || m.ghdegy < 0 || std::max(m.ghdegx, m.ghdegy) > kMaxGhDegree)
    f.fail(0, fmt::format("GHDEGX, GHDEGY are {}, {}, expected 0 to {}", m.ghdegx, m.ghdegy,
                          kMaxGhDegree));

  const ParamTable table = read_params(f, m.nspec, m.version == 2);
  m.param_ncoeff = table.ncoeff;
  auto trace_of = [&](const std::vector<double>& coeff, int ncoeff, double lo, double hi,
                      const std::string& what) {
    require_finite(f, what, coeff);
    if (!(hi > lo)) f.fail(0, fmt::format("{}: WAVEMAX {} is not above WAVEMIN {}", what, hi, lo));
    LegendreSet s;
    s.lo = lo;
    s.hi = hi;
    s.nspec = m.nspec;
    s.ncoeff = ncoeff;
    s.coeff = coeff;
    return s;
  };
  if (m.version == 2) {
    // specter's loader (a loop inside a loop) gives every parameter, X and Y included, the
    // domain of the table's last row.
    const auto& last = table.domains.at(table.order.back());
    m.param_lo = last.first;
    m.param_hi = last.second;
    for (const char* name : {"X", "Y"})
      if (!table.rows.count(name))
        f.fail(0, fmt::format("the PSFVER 2 table has no parameter {}", name));
    m.x = trace_of(table.rows.at("X"), table.ncoeff, m.param_lo, m.param_hi, "parameter X");
    m.y = trace_of(table.rows.at("Y"), table.ncoeff, m.param_lo, m.param_hi, "parameter Y");
  } else {
    m.param_lo = f.real_key("WAVEMIN");
    m.param_hi = f.real_key("WAVEMAX");
    // Each trace on its own HDU's domain (r0: 5543-7826 where the PSF HDU says 5543-7827).
    for (const char* name : {"XTRACE", "YTRACE"}) {
      f.move_to(name, "a PSFVER 3 Gauss-Hermite PSF has XTRACE, YTRACE and PSF HDUs");
      long rows = 0, cols = 0;
      auto coeff = f.image(rows, cols);
      if (rows != m.nspec)
        f.fail(0,
               fmt::format("HDU {} has {} rows, expected one per fibre ({})", name, rows, m.nspec));
      const double lo = f.real_key("WAVEMIN"), hi = f.real_key("WAVEMAX");
      (std::string(name) == "XTRACE" ? m.x : m.y) =
          trace_of(coeff, static_cast<int>(cols), lo, hi, fmt::format("HDU {}", name));
    }
  }
  if (!(m.param_hi > m.param_lo))
    f.fail(0, fmt::format("the parameters' WAVEMAX {} is not above WAVEMIN {}", m.param_hi,
                          m.param_lo));

  // The parameters in PsfParam order.
  std::vector<std::string> names = {"GHSIGX",   "GHSIGY",   "TAILAMP", "TAILCORE",
                                    "TAILXSCA", "TAILYSCA", "TAILINDE"};
  for (int i = 0; i <= m.ghdegx; ++i)
    for (int j = 0; j <= m.ghdegy; ++j) names.push_back(gh_name(i, j));
  m.has_tail = table.rows.count("TAILAMP") > 0;
  const std::size_t per_param = static_cast<std::size_t>(m.nspec) * m.param_ncoeff;
  m.params.assign(names.size() * per_param, 0.0);
  for (std::size_t k = 0; k < names.size(); ++k) {
    const bool tail = k >= kTailAmp && k < kFirstGh;
    auto it = table.rows.find(names[k]);
    if (it == table.rows.end()) {
      if (tail && !m.has_tail) continue;  // no tail: those parameters stay 0
      f.fail(0, fmt::format("the parameter table has no {} (GHDEGX {} and GHDEGY {} need GH-i-j "
                            "for every i <= GHDEGX, j <= GHDEGY{})",
                            names[k], m.ghdegx, m.ghdegy,
                            tail ? ", and a tail needs all five TAIL* parameters" : ""));
    }
    require_finite(f, fmt::format("parameter {}", names[k]), it->second);
    std::copy(it->second.begin(), it->second.end(), m.params.begin() + k * per_param);
  }
  return m;
}

// Checks and completes a model: the inverse trace and the wavelength range of every fibre.
void complete(PsfModel& m) {
  require(m.nspec >= 1, "psf", "at least one fibre", std::to_string(m.nspec));
  require(m.x.nspec == m.nspec && m.y.nspec == m.nspec &&
              m.x.coeff.size() == static_cast<std::size_t>(m.nspec) * m.x.ncoeff &&
              m.y.coeff.size() == static_cast<std::size_t>(m.nspec) * m.y.ncoeff,
          "psf", "x and y traces of nspec x ncoeff coefficients", "other sizes");
  require(m.params.size() == static_cast<std::size_t>(m.nparams()) * m.nspec * m.param_ncoeff,
          "psf", "nparams x nspec x ncoeff parameter coefficients",
          std::to_string(m.params.size()));
  m.w = invert(m.y);
  m.wmin_spec.resize(m.nspec);
  m.wmax_spec.resize(m.nspec);
  for (int i = 0; i < m.nspec; ++i) {
    m.wmin_spec[i] = m.w.eval(i, -0.5);
    m.wmax_spec[i] = m.w.eval(i, static_cast<double>(m.npix_y) - 0.5);
  }
  m.wmin = *std::min_element(m.wmin_spec.begin(), m.wmin_spec.end());
  m.wmin_all = *std::max_element(m.wmin_spec.begin(), m.wmin_spec.end());
  m.wmax = *std::max_element(m.wmax_spec.begin(), m.wmax_spec.end());
  m.wmax_all = *std::min_element(m.wmax_spec.begin(), m.wmax_spec.end());
  for (int i = 0; i < m.nspec; ++i)
    if (!(m.wmax_spec[i] > m.wmin_spec[i]))
      throw InvalidArgument(fmt::format(
          "{}: fibre {}: the wavelength decreases along the CCD rows ({} at row -0.5, {} at row "
          "{} - 0.5); sciproxy expects y(lambda) increasing",
          m.path, i, m.wmin_spec[i], m.wmax_spec[i], m.npix_y));
}

void require_fibre(const PsfModel& m, int ispec) {
  if (ispec < 0 || ispec >= m.nspec)
    throw InvalidArgument(
        fmt::format("ispec: expected a fibre index in [0, {}) of the PSF, got {}", m.nspec, ispec));
}

}  // namespace

Psf Psf::load(const std::string& path) {
  return Psf(read_model(path));
}

Psf::Psf(PsfModel model) {
  complete(model);
  model_ = std::make_shared<const PsfModel>(std::move(model));
}

double Psf::x(int ispec, double wavelength) const {
  require_fibre(*model_, ispec);
  return model_->x.eval(ispec, wavelength);
}

double Psf::y(int ispec, double wavelength) const {
  require_fibre(*model_, ispec);
  return model_->y.eval(ispec, wavelength);
}

double Psf::wavelength(int ispec, double y) const {
  require_fibre(*model_, ispec);
  return model_->w.eval(ispec, y);
}

double Psf::wdisp(int ispec, double wavelength) const {
  require_fibre(*model_, ispec);
  const PsfModel& m = *model_;
  // specter: angstroms_per_pixel = interp(lambda, ww, gradient(ww)) with ww the wavelength of
  // every row, times the spot's GHSIGY.
  const std::int64_t n = m.npix_y;
  auto ww = [&](std::int64_t row) { return m.w.eval(ispec, static_cast<double>(row)); };
  auto gradient = [&](std::int64_t row) {
    if (n == 1) return 0.0;
    if (row == 0) return ww(1) - ww(0);
    if (row == n - 1) return ww(n - 1) - ww(n - 2);
    return (ww(row + 1) - ww(row - 1)) / 2;
  };
  double per_pixel;
  if (wavelength <= ww(0)) {
    per_pixel = gradient(0);
  } else if (wavelength >= ww(n - 1)) {
    per_pixel = gradient(n - 1);
  } else {
    std::int64_t lo = 0, hi = n - 1;  // ww increasing: bisect for ww(lo) <= lambda < ww(hi)
    while (hi - lo > 1) {
      const std::int64_t mid = (lo + hi) / 2;
      (ww(mid) <= wavelength ? lo : hi) = mid;
    }
    const double t = (wavelength - ww(lo)) / (ww(hi) - ww(lo));
    per_pixel = gradient(lo) + t * (gradient(hi) - gradient(lo));
  }
  const double u = legendre_argument(wavelength, m.param_lo, m.param_hi);
  const double sigma = legendre_sum(
      m.params.data() + (static_cast<std::int64_t>(kGhSigY) * m.nspec + ispec) * m.param_ncoeff,
      m.param_ncoeff, u);
  return per_pixel * sigma;
}

double Psf::parameter(const std::string& name, int ispec, double wavelength) const {
  require_fibre(*model_, ispec);
  const PsfModel& m = *model_;
  static const char* const kFixed[] = {"GHSIGX",   "GHSIGY",   "TAILAMP", "TAILCORE",
                                       "TAILXSCA", "TAILYSCA", "TAILINDE"};
  int index = -1;
  for (int k = 0; k < kFirstGh; ++k)
    if (name == kFixed[k]) index = k;
  int i = 0, j = 0;
  char tail = 0;
  if (index < 0 && std::sscanf(name.c_str(), "GH-%d-%d%c", &i, &j, &tail) == 2 && i >= 0 &&
      j >= 0 && i <= m.ghdegx && j <= m.ghdegy)
    index = kFirstGh + i * (m.ghdegy + 1) + j;
  if (index < 0)
    throw InvalidArgument(fmt::format(
        "name: expected a parameter of the PSF (GHSIGX, GHSIGY, GH-i-j with i <= {}, j <= {}, "
        "TAILAMP, TAILCORE, TAILXSCA, TAILYSCA, TAILINDE), got \"{}\"",
        m.ghdegx, m.ghdegy, name));
  return legendre_sum(
      m.params.data() + (static_cast<std::int64_t>(index) * m.nspec + ispec) * m.param_ncoeff,
      m.param_ncoeff, legendre_argument(wavelength, m.param_lo, m.param_hi));
}

Spot Psf::spot(int ispec, double wavelength, std::optional<PixelRange> bounds) const {
  require_fibre(*model_, ispec);
  std::vector<double> scratch(kMaxSpotSide * kMaxSpotSide +
                              full_spot_scratch_size(host_view(*model_)));
  return clipped_spot(host_view(*model_), ispec, wavelength,
                      bounds.value_or(PixelRange{0, model_->npix_x, 0, model_->npix_y}),
                      scratch.data());
}

Spot clipped_spot(const PsfView& v, int ispec, double wavelength, const PixelRange& b,
                  double* scratch) {
  Spot s;
  // specter's xypix: the empty answers keep its slices' positions.
  if (wavelength < v.wmin_spec[ispec]) return s;
  if (wavelength > v.wmax_spec[ispec]) {
    s.ystart = b.ymax;
    return s;
  }
  SpotAxis ax, ay;
  double* pixels = scratch;
  full_spot(v, ispec, wavelength, ax, ay, pixels, scratch + kMaxSpotSide * kMaxSpotSide);
  const std::int64_t xlo = ax.start, xhi = ax.start + ax.n, ylo = ay.start, yhi = ay.start + ay.n;
  if (ylo >= b.ymax) {
    s.ystart = b.ymax;
    return s;
  }
  if (yhi < b.ymin) {
    s.ystart = b.ymin;
    return s;
  }
  if (xlo >= b.xmax) {
    s.xstart = b.xmax;
    return s;
  }
  if (xhi <= b.xmin) {
    s.xstart = b.xmin;
    return s;
  }
  const std::int64_t x0 = std::max(xlo, b.xmin), x1 = std::min(xhi, b.xmax);
  const std::int64_t y0 = std::max(ylo, b.ymin), y1 = std::min(yhi, b.ymax);
  s.xstart = x0 - b.xmin;
  s.ystart = y0 - b.ymin;
  if (x1 <= x0 || y1 <= y0) return s;
  s.nx = x1 - x0;
  s.ny = y1 - y0;
  s.pixels.resize(static_cast<std::size_t>(s.nx * s.ny));
  for (std::int64_t iy = 0; iy < s.ny; ++iy)
    for (std::int64_t ix = 0; ix < s.nx; ++ix)
      s.pixels[iy * s.nx + ix] = pixels[(y0 - ylo + iy) * ax.n + (x0 - xlo + ix)];
  return s;
}

PixelRange Psf::xyrange(int specmin, int specmax, double wavemin, double wavemax) const {
  const PsfModel& m = *model_;
  require(specmin >= 0 && specmin < specmax && specmax <= m.nspec, "spec_range",
          fmt::format("fibres within [0, {}) with specmin < specmax", m.nspec),
          fmt::format("[{}, {})", specmin, specmax));
  wavemin = std::max(wavemin, m.wmin);
  wavemax = std::min(wavemax, m.wmax);
  int lowest = specmin, highest = specmin;
  for (int i = specmin; i < specmax; ++i) {
    if (m.y.eval(i, wavemin) < m.y.eval(lowest, wavemin)) lowest = i;
    if (m.y.eval(i, wavemax) > m.y.eval(highest, wavemax)) highest = i;
  }
  PixelRange r;
  {
    const Spot lo = spot(lowest, wavemin), hi = spot(highest, wavemax);
    r.ymin = lo.ystart;
    r.ymax = hi.ystart + hi.ny;
  }
  // x: the extreme trace positions of the first and the last fibre on the CCD between the two
  // wavelengths (the wavelengths of every row, and the two ends).
  auto extreme_x = [&](int ispec, bool lowest_x, double ylow) {
    std::vector<double> w;
    for (std::int64_t row = 0; row < m.npix_y; ++row) w.push_back(m.w.eval(ispec, double(row)));
    if (w.front() < wavemin) std::erase_if(w, [&](double t) { return !(wavemin <= t); });
    if (!w.empty() && wavemax < w.back())
      std::erase_if(w, [&](double t) { return !(t <= wavemax); });
    w.push_back(wavemin);
    w.push_back(wavemax);
    double best_x = 0, best_w = 0;
    bool found = false;
    for (const double t : w) {
      const double y = m.y.eval(ispec, t), x = m.x.eval(ispec, t);
      if (!(ylow <= y && y < double(m.npix_y) - 0.5)) continue;
      if (!found || (lowest_x ? x < best_x : x > best_x)) {
        best_x = x;
        best_w = t;
        found = true;
      }
    }
    if (!found)
      throw InvalidArgument(
          fmt::format("wavelengths: fibre {} has no trace on the CCD between {} and {} Angstrom",
                      ispec, wavemin, wavemax));
    return std::pair{best_x, best_w};
  };
  // specter tests the first fibre's rows with 0 <= y - 0.5 and the last one's with -0.5 <= y.
  const auto [xlow, wlow] = extreme_x(specmin, true, 0.5);
  r.xmin = xlow < 0 ? 0 : spot(specmin, wlow).xstart;
  const auto [xhigh, whigh] = extreme_x(specmax - 1, false, -0.5);
  if (xhigh > double(m.npix_x)) {
    r.xmax = m.npix_x;
  } else {
    const SpotAxis ax = spot_axis(xhigh, m.hsizex);  // specter's _xypix: not clipped
    r.xmax = ax.start + ax.n;
  }
  return r;
}

std::vector<double> Psf::projection_matrix(int specmin, int specmax,
                                           std::span<const double> wavelengths,
                                           const PixelRange& range) const {
  const PsfModel& m = *model_;
  require(specmin >= 0 && specmin < specmax && specmax <= m.nspec, "spec_range",
          fmt::format("fibres within [0, {}) with specmin < specmax", m.nspec),
          fmt::format("[{}, {})", specmin, specmax));
  require(range.nx() > 0 && range.ny() > 0, "xyrange", "a non-empty pixel range",
          fmt::format("[{}, {}) x [{}, {})", range.xmin, range.xmax, range.ymin, range.ymax));
  const std::int64_t nflux = static_cast<std::int64_t>(wavelengths.size());
  const std::int64_t ncols = (specmax - specmin) * nflux, npix = range.nx() * range.ny();
  require_memory(8.0 * double(ncols) * double(npix), "spec_range, wavelengths, xyrange",
                 fmt::format("a dense projection matrix of {} pixels x {} flux bins", npix, ncols));
  std::vector<double> a(static_cast<std::size_t>(npix * ncols), 0.0);
  for (int ispec = specmin; ispec < specmax; ++ispec)
    for (std::int64_t j = 0; j < nflux; ++j) {
      const Spot s = spot(ispec, wavelengths[j], range);
      const std::int64_t col = (ispec - specmin) * nflux + j;
      for (std::int64_t iy = 0; iy < s.ny; ++iy)
        for (std::int64_t ix = 0; ix < s.nx; ++ix)
          a[((s.ystart + iy) * range.nx() + s.xstart + ix) * ncols + col] =
              s.pixels[iy * s.nx + ix];
    }
  return a;
}

std::vector<double> project(const Psf& psf, std::span<const double> wavelengths,
                            std::span<const double> phot, int specmin,
                            std::optional<PixelRange> range, int nparallel) {
  const PsfModel& m = psf.model();
  const PixelRange r = range.value_or(PixelRange{0, m.npix_x, 0, m.npix_y});
  const std::int64_t nwave = static_cast<std::int64_t>(wavelengths.size());
  require(nwave >= 1, "wavelength", "at least one wavelength", "none");
  require(phot.size() % nwave == 0, "phot",
          fmt::format("(nspec, {}) values, one row per spectrum", nwave),
          fmt::format("{} values", phot.size()));
  const int nspec = static_cast<int>(phot.size() / nwave);
  require(specmin >= 0 && specmin < m.nspec, "specmin",
          fmt::format("a fibre index in [0, {})", m.nspec), std::to_string(specmin));
  require(r.nx() > 0 && r.ny() > 0, "xyrange", "a non-empty pixel range",
          fmt::format("[{}, {}) x [{}, {})", r.xmin, r.xmax, r.ymin, r.ymax));
  for (std::int64_t j = 0; j < nwave; ++j)
    require(std::isfinite(wavelengths[j]), "wavelength", "finite values",
            fmt::format("{} at index {}", wavelengths[j], j));
  for (std::size_t k = 0; k < phot.size(); ++k)
    require(std::isfinite(phot[k]), "phot", "finite values",
            fmt::format("{} at index {}", phot[k], k));
  const int last = std::min(specmin + nspec, m.nspec);  // specter warns and projects what fits
  require_memory(8.0 * double(r.nx()) * double(r.ny()), "xyrange",
                 fmt::format("an image of {} x {} pixels", r.ny(), r.nx()));
  std::vector<double> image(static_cast<std::size_t>(r.nx() * r.ny()), 0.0);
  ThreadCount threads(resolve_threads(nparallel, "nparallel"));
  // Spots of one spectrum are computed in parallel and added in specter's order (spectrum by
  // spectrum, wavelength by wavelength), so the image is the same for any thread count.
  std::vector<Spot> spots(static_cast<std::size_t>(nwave));
  for (int ispec = specmin; ispec < last; ++ispec) {
    poll_cancellation();
    // specter's project: only wavelengths between those of rows 0 and npix_y.
    const double wlo = m.w.eval(ispec, 0.0), whi = m.w.eval(ispec, double(m.npix_y));
    const double* row = phot.data() + static_cast<std::size_t>(ispec - specmin) * nwave;
#pragma omp parallel for schedule(dynamic, 16)
    for (std::int64_t j = 0; j < nwave; ++j) {
      spots[j] = Spot{};
      if (row[j] != 0 && wlo <= wavelengths[j] && wavelengths[j] <= whi)
        spots[j] = psf.spot(ispec, wavelengths[j], r);
    }
    for (std::int64_t j = 0; j < nwave; ++j) {
      const Spot& s = spots[j];
      for (std::int64_t iy = 0; iy < s.ny; ++iy)
        for (std::int64_t ix = 0; ix < s.nx; ++ix)
          image[(s.ystart + iy) * r.nx() + s.xstart + ix] += s.pixels[iy * s.nx + ix] * row[j];
    }
  }
  return image;
}

}  // namespace sciproxy::specex
