// specex's files: the preprocessed image and the frame written and read back, desispec's mask
// bits, the FIBERMAP rows kept, the errors on bad files, and writes that are whole or absent.
#include <fitsio.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/test_directory.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/specex.hpp"

using namespace sciproxy;
using namespace sciproxy::specex;
namespace fs = std::filesystem;

namespace {

class SpecexFiles : public sciproxy::testing::TestDirectory {
 protected:
  SpecexFiles() : TestDirectory("sciproxy_specex_files_") {}
};

SimulatedImage small_image(std::int64_t ny = 3, std::int64_t nx = 4) {
  SimulatedImage s;
  s.range = {10, 10 + nx, 20, 20 + ny};
  for (std::int64_t i = 0; i < ny * nx; ++i) {
    s.image.push_back(0.5 * double(i) - 1.25);
    s.ivar.push_back(1.0 / (1.0 + double(i)));
    s.mask.push_back(i == 5 ? 4 : 0);  // a cosmic at row 1, column 1
  }
  s.read_noise = 2.5;
  return s;
}

struct Fits {
  fitsfile* f = nullptr;
  int status = 0;
  explicit Fits(const std::string& p) { fits_open_diskfile(&f, p.c_str(), READONLY, &status); }
  ~Fits() {
    int s = 0;
    if (f) fits_close_file(f, &s);
  }
  std::vector<std::string> hdu_names() {
    int n = 0;
    fits_get_num_hdus(f, &n, &status);
    std::vector<std::string> names;
    for (int i = 1; i <= n; ++i) {
      int type = 0;
      fits_movabs_hdu(f, i, &type, &status);
      char name[FLEN_VALUE] = "";
      int s = 0;
      fits_read_key(f, TSTRING, "EXTNAME", name, nullptr, &s);
      names.push_back(name);
    }
    return names;
  }
  void go(const char* name) {
    fits_movnam_hdu(f, ANY_HDU, const_cast<char*>(name), 0, &status);
    ASSERT_EQ(status, 0) << name;
  }
  std::vector<long long> shape() {
    int naxis = 0, bitpix = 0;
    LONGLONG axes[4] = {};
    fits_get_img_paramll(f, 4, &bitpix, &naxis, axes, &status);
    return std::vector<long long>(axes, axes + naxis);
  }
  int bitpix() {
    int b = 0;
    fits_get_img_equivtype(f, &b, &status);
    return b;
  }
  template <class T>
  std::vector<T> read(int type, std::size_t n) {
    std::vector<T> v(n);
    int anynul = 0;
    fits_read_img(f, type, 1, n, nullptr, v.data(), &anynul, &status);
    return v;
  }
  std::string key(const char* k) {
    char* v = nullptr;
    int s = 0;
    fits_read_key_longstr(f, k, &v, nullptr, &s);
    std::string out = s == 0 && v ? v : "";
    if (v) fits_free_memory(v, &s);
    return out;
  }
  long long key_long(const char* k) {
    long long v = -999;
    int s = 0;
    fits_read_key(f, TLONGLONG, k, &v, nullptr, &s);
    return v;
  }
};

// A FITS file with a FIBERMAP table of nrows rows: FIBER = 100 + row.
void write_fibermap_file(const std::string& p, int nrows) {
  fitsfile* f = nullptr;
  int status = 0;
  fits_create_diskfile(&f, p.c_str(), &status);
  fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
  char* names[] = {const_cast<char*>("FIBER"), const_cast<char*>("TARGETID")};
  char* forms[] = {const_cast<char*>("J"), const_cast<char*>("K")};
  fits_create_tbl(f, BINARY_TBL, 0, 2, names, forms, nullptr, "FIBERMAP", &status);
  std::vector<int> fiber(nrows);
  std::vector<long long> target(nrows);
  for (int i = 0; i < nrows; ++i) {
    fiber[i] = 100 + i;
    target[i] = 39627000000LL + i;
  }
  fits_write_col(f, TINT, 1, 1, 1, nrows, fiber.data(), &status);
  fits_write_col(f, TLONGLONG, 2, 1, 1, nrows, target.data(), &status);
  fits_close_file(f, &status);
  ASSERT_EQ(status, 0);
}

Ex2dResult small_result(std::int64_t nspec = 3, std::int64_t nwave = 5, int ndiag = 1) {
  Ex2dResult r;
  r.nspec = nspec;
  r.nwave = nwave;
  r.ndiag = ndiag;
  const auto n = static_cast<std::size_t>(nspec * nwave);
  for (std::size_t i = 0; i < n; ++i) {
    r.flux.push_back(10.0 + double(i));
    r.ivar.push_back(0.01 * double(i + 1));
    r.chi2pix.push_back(1.0);
    r.pixmask_fraction.push_back(0.0);
  }
  for (std::size_t i = 0; i < n * (2 * ndiag + 1); ++i) r.resolution.push_back(double(i) / 7);
  // desispec's rules: > 0.5 SOMEBADPIX (bit 0), == 1 also ALLBADPIX (bit 1), chi2pix > 100
  // BAD2DFIT (bit 7).
  r.pixmask_fraction[1] = 0.5;   // none: not above 0.5
  r.pixmask_fraction[2] = 0.75;  // SOMEBADPIX
  r.pixmask_fraction[3] = 1.0;   // SOMEBADPIX | ALLBADPIX
  r.chi2pix[4] = 100.0;          // none: not above 100
  r.chi2pix[6] = 250.0;          // BAD2DFIT
  r.model.assign(6, 0.0);
  for (int i = 0; i < 6; ++i) r.model[i] = 0.25 * i;
  return r;
}

FrameInfo small_info(std::int64_t nwave = 5) {
  FrameInfo info;
  info.wavelengths = wavelength_grid(5760.0, 5760.0 + 0.8 * double(nwave - 1), 0.8);
  info.specmin = 2;
  info.camera = "r0";
  info.psf_path = "/some/where/psf-r0-00067784.fits";
  info.image_path = "preproc-r0-00067784.fits";
  return info;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(SpecexWavelengthGrid, AsNumpyArange) {
  // np.arange(5760, 5761 + 0.25, 0.5) = [5760, 5760.5, 5761]
  EXPECT_EQ(wavelength_grid(5760, 5761, 0.5), (std::vector<double>{5760, 5760.5, 5761}));
  // The last bin may pass wmax by less than dw/2: np.arange(5760, 5761.2 + 0.4, 0.8) has 2.
  EXPECT_EQ(wavelength_grid(5760, 5761.2, 0.8).size(), 2u);
  EXPECT_EQ(wavelength_grid(5760, 5760, 0.8), (std::vector<double>{5760}));
  // The production r grid: 5760-7620 at 0.8 A, 2326 bins.
  const auto r = wavelength_grid(5760, 7620, 0.8);
  EXPECT_EQ(r.size(), 2326u);
  EXPECT_NEAR(r.back(), 5760 + 2325 * 0.8, 1e-6);
  EXPECT_THROW(wavelength_grid(5760, 7620, 0), InvalidArgument);
  EXPECT_THROW(wavelength_grid(5760, 7620, -0.8), InvalidArgument);
  EXPECT_THROW(wavelength_grid(7620, 5760, 0.8), InvalidArgument);
  EXPECT_THROW(wavelength_grid(std::nan(""), 5760, 0.8), InvalidArgument);
  EXPECT_THROW(wavelength_grid(5760, 7620, 1e-9), InvalidArgument);  // too many bins
}

TEST_F(SpecexFiles, PreprocRoundTrip) {
  const SimulatedImage s = small_image();
  const std::string p = path("preproc.fits");
  write_preproc_image(p, s, "b3");
  EXPECT_EQ(listing(), std::vector<std::string>{"preproc.fits"});
  const PreprocImage r = read_preproc_image(p);
  EXPECT_EQ(r.path, p);
  EXPECT_EQ(r.ny, 3);
  EXPECT_EQ(r.nx, 4);
  EXPECT_EQ(r.camera, "b3");
  EXPECT_FALSE(r.has_fibermap);
  ASSERT_EQ(r.image.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(r.image[i], double(float(s.image[i])));  // float32 on disk, lossless
    EXPECT_EQ(r.mask[i], s.mask[i]);
    // ivar 0 where the mask is set
    EXPECT_EQ(r.ivar[i], i == 5 ? 0.0 : double(float(s.ivar[i])));
  }
  Fits f(p);
  f.go("IMAGE");
  EXPECT_EQ(f.shape(), (std::vector<long long>{4, 3}));
  EXPECT_EQ(f.bitpix(), FLOAT_IMG);
  EXPECT_EQ(f.key("CAMERA"), "b3");
  f.go("MASK");
  EXPECT_EQ(f.bitpix(), SHORT_IMG);
  EXPECT_EQ(f.status, 0);
}

TEST_F(SpecexFiles, PreprocWithFibermap) {
  // A preprocessed image with a FIBERMAP HDU appended: read says so.
  const std::string p = path("preproc.fits");
  write_preproc_image(p, small_image(), "r0");
  fitsfile* f = nullptr;
  int status = 0;
  fits_open_diskfile(&f, p.c_str(), READWRITE, &status);
  char* names[] = {const_cast<char*>("FIBER")};
  char* forms[] = {const_cast<char*>("J")};
  fits_create_tbl(f, BINARY_TBL, 0, 1, names, forms, nullptr, "FIBERMAP", &status);
  fits_close_file(f, &status);
  ASSERT_EQ(status, 0);
  EXPECT_TRUE(read_preproc_image(p).has_fibermap);
}

TEST_F(SpecexFiles, ReadErrorsNameTheFile) {
  const std::string missing = path("missing.fits");
  std::string m = error_of([&] { read_preproc_image(missing); });
  EXPECT_NE(m.find(missing), std::string::npos) << m;
  EXPECT_NE(m.find("no such file"), std::string::npos) << m;
  EXPECT_THROW(read_preproc_image(missing), InvalidArgument);

  const std::string text = path("notes.fits");
  std::ofstream(text) << "this is not a FITS file\n";
  m = error_of([&] { read_preproc_image(text); });
  EXPECT_NE(m.find(text), std::string::npos) << m;
  EXPECT_NE(m.find("not"), std::string::npos) << m;
  EXPECT_THROW(read_preproc_image(text), InvalidArgument);

  EXPECT_THROW(read_preproc_image(dir_.string()), InvalidArgument);  // a directory

  // A model image has IMAGE only: the IVAR HDU is missing.
  const std::string model = path("model.fits");
  Ex2dResult r = small_result();
  write_model_image(model, r, 2, 3);
  m = error_of([&] { read_preproc_image(model); });
  EXPECT_NE(m.find("IVAR"), std::string::npos) << m;
  EXPECT_NE(m.find(model), std::string::npos) << m;
  EXPECT_THROW(read_preproc_image(model), InvalidArgument);
}

TEST_F(SpecexFiles, ReadRefusesNaNNegativeIvarAndShapes) {
  SimulatedImage s = small_image();
  s.image[6] = std::nan("");
  s.image[9] = std::numeric_limits<double>::quiet_NaN();
  write_preproc_image(path("nan.fits"), s, "r0");
  const std::string m = error_of([&] { read_preproc_image(path("nan.fits")); });
  EXPECT_NE(m.find("IMAGE"), std::string::npos) << m;
  EXPECT_NE(m.find("2 NaN"), std::string::npos) << m;
  EXPECT_NE(m.find("row 1, column 2"), std::string::npos) << m;  // index 6 of 3 x 4
  EXPECT_THROW(read_preproc_image(path("nan.fits")), InvalidArgument);

  s = small_image();
  s.ivar[3] = -1;
  write_preproc_image(path("neg.fits"), s, "r0");
  const std::string n = error_of([&] { read_preproc_image(path("neg.fits")); });
  EXPECT_NE(n.find("IVAR"), std::string::npos) << n;
  EXPECT_NE(n.find("row 0, column 3"), std::string::npos) << n;

  // A MASK of another shape.
  const std::string p = path("shape.fits");
  write_preproc_image(p, small_image(), "r0");
  fitsfile* f = nullptr;
  int status = 0;
  fits_open_diskfile(&f, p.c_str(), READWRITE, &status);
  fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("MASK"), 0, &status);
  fits_delete_hdu(f, nullptr, &status);
  long axes[2] = {5, 3};
  fits_create_img(f, SHORT_IMG, 2, axes, &status);
  fits_update_key(f, TSTRING, "EXTNAME", const_cast<char*>("MASK"), nullptr, &status);
  std::vector<short> zeros(15, 0);
  fits_write_img(f, TSHORT, 1, 15, zeros.data(), &status);
  fits_close_file(f, &status);
  ASSERT_EQ(status, 0);
  const std::string sh = error_of([&] { read_preproc_image(p); });
  EXPECT_NE(sh.find("MASK"), std::string::npos) << sh;
  EXPECT_NE(sh.find("3 x 4"), std::string::npos) << sh;
  EXPECT_NE(sh.find("3 x 5"), std::string::npos) << sh;
}

TEST_F(SpecexFiles, FrameLayoutAndMask) {
  const Ex2dResult r = small_result();
  FrameInfo info = small_info();
  const std::string src = path("fibermap.fits");
  write_fibermap_file(src, 10);
  info.fibermap_source = src;
  const std::string p = path("frame.fits");
  write_frame(p, r, info);
  EXPECT_EQ(listing(), (std::vector<std::string>{"fibermap.fits", "frame.fits"}));

  Fits f(p);
  EXPECT_EQ(f.hdu_names(), (std::vector<std::string>{"FLUX", "IVAR", "MASK", "WAVELENGTH",
                                                     "RESOLUTION", "FIBERMAP", "CHI2PIX"}));
  f.go("FLUX");
  EXPECT_EQ(f.shape(), (std::vector<long long>{5, 3}));
  EXPECT_EQ(f.bitpix(), FLOAT_IMG);
  EXPECT_EQ(f.key("BUNIT"), "electron/Angstrom");
  EXPECT_EQ(f.key_long("SPECMIN"), 2);
  EXPECT_EQ(f.key_long("NSPEC"), 3);
  EXPECT_EQ(f.key("CAMERA"), "r0");
  EXPECT_EQ(f.key("IN_PSF"), info.psf_path);
  EXPECT_EQ(f.key("IN_IMG"), info.image_path);
  const auto flux = f.read<float>(TFLOAT, 15);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(flux[i], float(r.flux[i]));
  f.go("MASK");
  EXPECT_EQ(f.bitpix(), LONG_IMG);
  const auto mask = f.read<int>(TINT, 15);
  std::vector<int> expected(15, 0);
  expected[2] = 1;
  expected[3] = 1 | 2;
  expected[6] = 128;
  EXPECT_EQ(mask, expected);
  f.go("WAVELENGTH");
  EXPECT_EQ(f.bitpix(), DOUBLE_IMG);
  EXPECT_EQ(f.key("BUNIT"), "Angstrom");
  EXPECT_EQ(f.read<double>(TDOUBLE, 5), info.wavelengths);
  f.go("RESOLUTION");
  EXPECT_EQ(f.shape(), (std::vector<long long>{5, 3, 3}));  // nwave, 2 ndiag + 1, nspec
  const auto res = f.read<float>(TFLOAT, 45);
  for (int i = 0; i < 45; ++i) EXPECT_EQ(res[i], float(r.resolution[i]));
  f.go("CHI2PIX");
  EXPECT_EQ(f.read<float>(TFLOAT, 15)[6], 250.0f);
  // desispec keeps fibermap[specmin:specmin + nspec]: rows 2, 3, 4.
  f.go("FIBERMAP");
  long long nrows = 0;
  fits_get_num_rowsll(f.f, &nrows, &f.status);
  EXPECT_EQ(nrows, 3);
  std::vector<int> fiber(3);
  int anynul = 0;
  fits_read_col(f.f, TINT, 1, 1, 1, 3, nullptr, fiber.data(), &anynul, &f.status);
  EXPECT_EQ(fiber, (std::vector<int>{102, 103, 104}));
  EXPECT_EQ(f.status, 0);
}

TEST_F(SpecexFiles, FrameWithoutFullOutputOrFibermap) {
  Ex2dResult r = small_result();
  r.chi2pix.clear();
  r.pixmask_fraction.clear();
  const std::string p = path("frame.fits");
  write_frame(p, r, small_info());
  Fits f(p);
  EXPECT_EQ(f.hdu_names(),
            (std::vector<std::string>{"FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION"}));
  f.go("MASK");
  EXPECT_EQ(f.read<int>(TINT, 15), std::vector<int>(15, 0));
}

TEST_F(SpecexFiles, ModelImage) {
  const Ex2dResult r = small_result();
  const std::string p = path("model.fits");
  write_model_image(p, r, 2, 3);
  Fits f(p);
  f.go("IMAGE");
  EXPECT_EQ(f.shape(), (std::vector<long long>{3, 2}));
  const auto m = f.read<float>(TFLOAT, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(m[i], float(r.model[i]));
  EXPECT_THROW(write_model_image(path("bad.fits"), r, 3, 3), InvalidArgument);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.fits"});
}

TEST_F(SpecexFiles, BadArgumentsWriteNothing) {
  Ex2dResult r = small_result();
  const FrameInfo info = small_info();
  r.flux.pop_back();
  EXPECT_THROW(write_frame(path("frame.fits"), r, info), InvalidArgument);
  r = small_result();
  r.resolution.pop_back();
  EXPECT_THROW(write_frame(path("frame.fits"), r, info), InvalidArgument);
  r = small_result();
  FrameInfo short_info = info;
  short_info.wavelengths.pop_back();
  EXPECT_THROW(write_frame(path("frame.fits"), r, short_info), InvalidArgument);
  // A fibermap source without enough rows, or without a FIBERMAP HDU.
  FrameInfo with_fibermap = info;
  write_fibermap_file(path("fm.fits"), 4);  // specmin 2 + nspec 3 = 5 rows needed
  with_fibermap.fibermap_source = path("fm.fits");
  const std::string m = error_of([&] { write_frame(path("frame.fits"), r, with_fibermap); });
  EXPECT_NE(m.find("FIBERMAP"), std::string::npos) << m;
  write_model_image(path("nofm.fits"), r, 2, 3);
  with_fibermap.fibermap_source = path("nofm.fits");
  EXPECT_THROW(write_frame(path("frame.fits"), r, with_fibermap), InvalidArgument);
  EXPECT_EQ(listing(), (std::vector<std::string>{"fm.fits", "nofm.fits"}));
  // A missing directory, a directory as the path.
  EXPECT_THROW(write_frame(path("no/such/dir/frame.fits"), r, info), IoError);
  EXPECT_THROW(write_frame(dir_.string(), r, info), InvalidArgument);
  EXPECT_THROW(write_preproc_image(path("no/such/p.fits"), small_image(), "r0"), IoError);
}

TEST_F(SpecexFiles, FailedWriteLeavesNothingAndKeepsTheOldFile) {
  // A write that fails half-way (the file size limit, EFBIG): no temporary is left, and the file
  // already at the path is the one that was there.
  const std::string p = path("frame.fits");
  const Ex2dResult small = small_result();
  write_frame(p, small, small_info());
  const auto before = fs::file_size(p);
  const Ex2dResult big = small_result(50, 2000, 5);  // about 5 MB
  const FrameInfo big_info = small_info(2000);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit limit = old_limit;
  limit.rlim_cur = 200000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string m;
  try {
    write_frame(p, big, big_info);
    m = "(no error)";
  } catch (const IoError& e) {
    m = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(m.find("could not write"), std::string::npos) << m;
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_EQ(listing(), std::vector<std::string>{"frame.fits"});
  EXPECT_EQ(fs::file_size(p), before);
  // And the same write succeeds without the limit.
  write_frame(p, big, big_info);
  EXPECT_GT(fs::file_size(p), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"frame.fits"});
}
