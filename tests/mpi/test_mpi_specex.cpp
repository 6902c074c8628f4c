// specex's ex2d and extract_frame on 1, 2 and 3 ranks against one process, bit for bit: every
// array of the result (the model image too), on rank 0 or on every rank, bundles that do not
// divide among the ranks or are fewer than the ranks; an image or ivar that differs on one rank,
// or bad input on one rank, fails on every rank; the frame file is written once, by rank 0,
// whole and the same bytes as one process writes, and not at all when a rank fails.
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/sciproxy.h"
#include "sciproxy/specex.hpp"

#ifndef SCIPROXY_SPECEX_PSF_R0
#define SCIPROXY_SPECEX_PSF_R0 "psf-r0-00067784.fits"
#endif

namespace sciproxy::test {
namespace {

using specex::Ex2dOptions;
using specex::Ex2dResult;
using specex::ResultLayout;

const Device kCpu{Backend::cpu, 0, false};

const specex::Psf& psf() {
  static const specex::Psf p = specex::Psf::load(SCIPROXY_SPECEX_PSF_R0);
  return p;
}

// A noisy cut-out of fibres [0, nspec) at 6000-6040 A (41 wavelengths), the same on every rank.
struct Frame {
  std::vector<double> wave = specex::wavelength_grid(6000, 6040, 1);
  specex::SimulatedImage image;
  explicit Frame(int nspec) {
    std::vector<double> phot(static_cast<std::size_t>(nspec) * wave.size());
    for (std::size_t k = 0; k < phot.size(); ++k) phot[k] = 200 + 50 * std::sin(0.37 * double(k));
    specex::PixelRange r = psf().xyrange(0, nspec, wave.front(), wave.back());
    r.ymin -= 40;
    r.ymax += 40;
    r.xmin = std::max<std::int64_t>(0, r.xmin - 5);
    r.xmax += 5;
    image = specex::simulate_image(psf(), wave, phot, 0, r, 3.0, 7);
  }
  specex::ImageInput input() const {
    return {image.image, image.ivar, image.range.ny(), image.range.nx(), image.range};
  }
};

Ex2dOptions small_options() {
  Ex2dOptions o;
  o.bundlesize = 5;
  o.nsubbundles = 1;
  o.wavesize = 20;
  o.nparallel = 1;
  return o;
}

void expect_same_bits(const Ex2dResult& got, const Ex2dResult& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.nspec, want.nspec);
  EXPECT_EQ(got.nwave, want.nwave);
  EXPECT_EQ(got.ndiag, want.ndiag);
  EXPECT_EQ(got.npatches, want.npatches);
  EXPECT_EQ(got.retried_patches, want.retried_patches);
  // Exact equality of doubles (NaN would differ, and there is none).
  EXPECT_EQ(got.flux, want.flux);
  EXPECT_EQ(got.ivar, want.ivar);
  EXPECT_EQ(got.resolution, want.resolution);
  EXPECT_EQ(got.chi2pix, want.chi2pix);
  EXPECT_EQ(got.pixmask_fraction, want.pixmask_fraction);
  EXPECT_EQ(got.model, want.model);
}

// The result of every layout is one process's, bit for bit; with ResultLayout::root the other
// ranks hold the sizes and counts and no arrays.
void check_layouts(int nspec, Ex2dOptions o, const std::string& what) {
  const auto& comm = world();
  const Frame f(nspec);
  const Ex2dResult one = specex::ex2d(kCpu, psf(), f.input(), 0, nspec, f.wave, o);
  ASSERT_FALSE(one.flux.empty());
  if (o.full_output) {
    ASSERT_FALSE(one.model.empty());
  }
  o.comm = comm;
  o.result_layout = ResultLayout::all_ranks;
  const Ex2dResult all = specex::ex2d(kCpu, psf(), f.input(), 0, nspec, f.wave, o);
  expect_same_bits(all, one, what + ", all ranks");
  o.result_layout = ResultLayout::root;
  const Ex2dResult root = specex::ex2d(kCpu, psf(), f.input(), 0, nspec, f.wave, o);
  if (comm.rank() == 0) {
    expect_same_bits(root, one, what + ", rank 0");
  } else {
    EXPECT_EQ(root.nspec, one.nspec);
    EXPECT_EQ(root.npatches, one.npatches);
    EXPECT_EQ(root.retried_patches, one.retried_patches);
    EXPECT_TRUE(root.flux.empty() && root.ivar.empty() && root.resolution.empty() &&
                root.model.empty());
  }
}

// 4 bundles: 4, 2 + 2 and 2 + 1 + 1 on 1, 2 and 3 ranks.
TEST(MpiSpecex, EveryLayoutIsTheOneProcessResultBitForBit) {
  check_layouts(20, small_options(), "4 bundles, full output");
  Ex2dOptions o = small_options();
  o.full_output = false;
  o.bundlesize = 6;
  o.nsubbundles = 3;
  o.ndecorr = true;
  check_layouts(24, o, "4 bundles of 6, 3 subbundles, noise mode, no full output");
}

// The model sums bundles whose pixels overlap: bundles of 2 fibres lie closer than a spot.
TEST(MpiSpecex, OverlappingBundlesGiveTheSameModel) {
  Ex2dOptions o = small_options();
  o.bundlesize = 2;
  check_layouts(10, o, "5 bundles of 2 fibres");
}

// One bundle: on 2 and 3 ranks, ranks with nothing to extract still take part.
TEST(MpiSpecex, MoreRanksThanBundles) {
  check_layouts(5, small_options(), "1 bundle");
  check_layouts(10, small_options(), "2 bundles");
}

// Each rank reports its own bundles to the progress callback.
TEST(MpiSpecex, ProgressCountsThisRanksBundles) {
  const auto& comm = world();
  const Frame f(20);
  Ex2dOptions o = small_options();
  o.comm = comm;
  std::vector<std::pair<int, int>> calls;
  o.progress = [](void* c, int done, int total) {
    static_cast<std::vector<std::pair<int, int>>*>(c)->emplace_back(done, total);
  };
  o.progress_context = &calls;
  specex::ex2d(kCpu, psf(), f.input(), 0, 20, f.wave, o);
  const auto block = collective::block_of(4, comm);
  ASSERT_EQ(static_cast<std::int64_t>(calls.size()), block.count);
  for (std::size_t k = 0; k < calls.size(); ++k)
    EXPECT_EQ(calls[k], (std::pair<int, int>(int(k) + 1, int(block.count))));
}

TEST(MpiSpecex, InputsThatDifferOnOneRankFailOnEveryRank) {
  const auto& comm = world();
  if (!comm.distributed()) GTEST_SKIP() << "needs 2 ranks or more";
  const int odd = comm.size() - 1;
  Ex2dOptions o = small_options();
  o.comm = comm;
  {
    Frame f(10);
    if (comm.rank() == odd) f.image.image[123] += 1;
    expect_error_on_every_rank<InvalidArgument>(
        [&] { specex::ex2d(kCpu, psf(), f.input(), 0, 10, f.wave, o); },
        fmt::format("ex2d: the ranks disagree on the values of image: rank 0 and rank {}", odd));
  }
  {
    Frame f(10);
    if (comm.rank() == odd) f.image.ivar[7] = 0;
    expect_error_on_every_rank<InvalidArgument>(
        [&] { specex::ex2d(kCpu, psf(), f.input(), 0, 10, f.wave, o); },
        "the ranks disagree on the values of imageivar");
  }
  {
    Frame f(10);
    Ex2dOptions other = o;
    if (comm.rank() == odd) other.nsubbundles = 5;
    expect_error_on_every_rank<InvalidArgument>(
        [&] { specex::ex2d(kCpu, psf(), f.input(), 0, 10, f.wave, other); },
        "the ranks disagree on nsubbundles: rank 0 passed 1");
  }
}

TEST(MpiSpecex, BadInputOnOneRankFailsOnEveryRankNamingIt) {
  const auto& comm = world();
  const int bad = comm.size() - 1;
  Frame f(10);
  if (comm.rank() == bad) f.image.ivar[11] = -1;
  Ex2dOptions o = small_options();
  o.comm = comm;
  expect_error_on_every_rank<InvalidArgument>(
      [&] { specex::ex2d(kCpu, psf(), f.input(), 0, 10, f.wave, o); },
      comm.distributed() ? fmt::format("rank {} of {}: imageivar", bad, comm.size()) : "imageivar");
}

// A folder every rank sees: rank 0's name for it, removed at the end.
class SharedDirectory {
 public:
  SharedDirectory() {
    std::string name;
    if (world().rank() == 0) {
      name = (std::filesystem::temp_directory_path() /
              fmt::format("sciproxy_mpi_specex_{}", ::getpid()))
                 .string();
      std::filesystem::remove_all(name);
      std::filesystem::create_directories(name);
    }
    collective::broadcast(world(), name, 0);
    dir_ = name;
  }
  ~SharedDirectory() {
    collective::barrier(world());
    if (world().rank() == 0) std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path dir_;
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A preprocessed image of the whole CCD: the cut-out of Frame, zeros with ivar 0 elsewhere.
void write_ccd(const std::string& path, const Frame& f, double change = 0) {
  specex::SimulatedImage ccd;
  ccd.range = {0, psf().npix_x(), 0, psf().npix_y()};
  const auto n = static_cast<std::size_t>(ccd.range.nx() * ccd.range.ny());
  ccd.image.assign(n, 0.0);
  ccd.ivar.assign(n, 0.0);
  ccd.mask.assign(n, 0);
  const specex::PixelRange& r = f.image.range;
  for (std::int64_t y = r.ymin; y < r.ymax; ++y)
    for (std::int64_t x = r.xmin; x < r.xmax; ++x) {
      const auto from = static_cast<std::size_t>((y - r.ymin) * r.nx() + (x - r.xmin));
      const auto to = static_cast<std::size_t>(y * ccd.range.nx() + x);
      ccd.image[to] = f.image.image[from];
      ccd.ivar[to] = f.image.ivar[from];
    }
  ccd.image[static_cast<std::size_t>(r.ymin + 30) * ccd.range.nx() + r.xmin + 10] += change;
  specex::write_preproc_image(path, ccd, "r0");
}

// The frame and the model image: written by rank 0 once, whole, the bytes one process writes.
TEST(MpiSpecex, FrameWrittenOnceByRankZero) {
  const auto& comm = world();
  const SharedDirectory dir;
  const Frame f(15);
  if (comm.rank() == 0) {
    write_ccd(dir.path("preproc.fits"), f);
    write_ccd(dir.path("preproc-changed.fits"), f, 5.0);
  }
  collective::barrier(comm);
  Ex2dOptions o = small_options();
  if (comm.rank() == 0)
    specex::extract_frame(kCpu, dir.path("preproc.fits"), SCIPROXY_SPECEX_PSF_R0,
                          dir.path("one.fits"), dir.path("one-model.fits"), f.wave, 0, 15, o);
  collective::barrier(comm);
  o.comm = comm;
  const Ex2dResult r =
      specex::extract_frame(kCpu, dir.path("preproc.fits"), SCIPROXY_SPECEX_PSF_R0,
                            dir.path("frame.fits"), dir.path("model.fits"), f.wave, 0, 15, o);
  EXPECT_EQ(r.flux.empty(), comm.rank() != 0);
  collective::barrier(comm);
  if (comm.rank() == 0) {
    EXPECT_EQ(dir.listing(),
              (std::vector<std::string>{"frame.fits", "model.fits", "one-model.fits", "one.fits",
                                        "preproc-changed.fits", "preproc.fits"}));
    const std::string frame = bytes_of(dir.path("frame.fits"));
    EXPECT_GT(frame.size(), 2880u * 8);
    EXPECT_EQ(frame.size() % 2880, 0u);  // whole FITS blocks
    EXPECT_TRUE(frame == bytes_of(dir.path("one.fits")));
    EXPECT_TRUE(bytes_of(dir.path("model.fits")) == bytes_of(dir.path("one-model.fits")));
  }
  collective::barrier(comm);
  // One rank reads another image: every rank fails, no file appears.
  if (comm.distributed()) {
    const std::string image = comm.rank() == comm.size() - 1 ? dir.path("preproc-changed.fits")
                                                             : dir.path("preproc.fits");
    expect_error_on_every_rank<InvalidArgument>(
        [&] {
          specex::extract_frame(kCpu, image, SCIPROXY_SPECEX_PSF_R0, dir.path("never.fits"), "",
                                f.wave, 0, 15, o);
        },
        "the ranks disagree on the values of image");
  }
  // A folder rank 0 cannot write to: the error on every rank, before any extraction.
  expect_error_on_every_rank<IoError>(
      [&] {
        specex::extract_frame(kCpu, dir.path("preproc.fits"), SCIPROXY_SPECEX_PSF_R0,
                              dir.path("no/such/frame.fits"), "", f.wave, 0, 15, o);
      },
      "does not exist");
  // Rank 0's write fails after the extraction (the frame's name is a folder): every rank fails,
  // no temporary is left.
  if (comm.rank() == 0) std::filesystem::create_directory(dir.path("folder.fits"));
  collective::barrier(comm);
  expect_error_on_every_rank<InvalidArgument>(
      [&] {
        specex::extract_frame(kCpu, dir.path("preproc.fits"), SCIPROXY_SPECEX_PSF_R0,
                              dir.path("folder.fits"), "", f.wave, 0, 15, o);
      },
      comm.distributed() ? fmt::format("rank 0 of {}: frame: expected a file name", comm.size())
                         : "folder.fits', which is a directory");
  collective::barrier(comm);
  if (comm.rank() == 0) {
    std::filesystem::remove(dir.path("folder.fits"));
    EXPECT_EQ(dir.listing().size(), 6u) << fmt::format("{}", fmt::join(dir.listing(), ", "));
  }
}

// The C ABI with options.comm: the one-process arrays on rank 0 (the others pass NULL) or on
// every rank; an error on one rank (its NULL flux) is every rank's.
TEST(MpiSpecex, CAbiWithACommunicator) {
  const auto& comm = world();
  const Frame f(15);
  sciproxy_specex_psf* handle = nullptr;
  ASSERT_EQ(sciproxy_specex_psf_load(SCIPROXY_SPECEX_PSF_R0, &handle), SCIPROXY_OK);
  sciproxy_specex_input in{};
  in.psf = handle;
  in.image = f.image.image.data();
  in.ivar = f.image.ivar.data();
  in.ny = f.image.range.ny();
  in.nx = f.image.range.nx();
  in.has_range = 1;
  in.xmin = f.image.range.xmin;
  in.xmax = f.image.range.xmax;
  in.ymin = f.image.range.ymin;
  in.ymax = f.image.range.ymax;
  in.specmin = 0;
  in.nspec = 15;
  in.wavelengths = f.wave.data();
  in.nwave = static_cast<std::int64_t>(f.wave.size());
  sciproxy_specex_options o;
  sciproxy_specex_options_default(&o);
  o.device = "cpu";
  o.bundlesize = 5;
  o.wavesize = 20;
  o.nparallel = 1;
  const std::size_t n = 15 * f.wave.size(), npix = f.image.image.size();
  std::vector<double> flux(n), ivar(n), model(npix);
  ASSERT_EQ(sciproxy_specex_ex2d(&in, &o, flux.data(), ivar.data(), nullptr, 0, nullptr, nullptr,
                                 model.data(), nullptr),
            SCIPROXY_OK)
      << sciproxy_last_error();
  o.comm = comm.handle();
  for (const int layout : {1, 0}) {
    o.result_layout = layout;
    const bool receives = layout == 0 || comm.rank() == 0;
    std::vector<double> f2(receives ? n : 0, -1.0), i2(receives ? n : 0, -1.0),
        m2(receives ? npix : 0, -1.0);
    int32_t ndiag = -1;
    ASSERT_EQ(sciproxy_specex_ex2d(&in, &o, receives ? f2.data() : nullptr,
                                   receives ? i2.data() : nullptr, nullptr, 0, nullptr, nullptr,
                                   receives ? m2.data() : nullptr, &ndiag),
              SCIPROXY_OK)
        << sciproxy_last_error();
    EXPECT_GT(ndiag, 0);
    if (receives) {
      EXPECT_EQ(f2, flux) << "layout " << layout;
      EXPECT_EQ(i2, ivar) << "layout " << layout;
      EXPECT_EQ(m2, model) << "layout " << layout;
    }
  }
  if (comm.distributed()) {
    o.result_layout = 0;  // every rank receives: the last rank's NULL flux is an error
    const int bad = comm.size() - 1;
    std::vector<double> f2(n), i2(n);
    EXPECT_EQ(sciproxy_specex_ex2d(&in, &o, comm.rank() == bad ? nullptr : f2.data(), i2.data(),
                                   nullptr, 0, nullptr, nullptr, nullptr, nullptr),
              SCIPROXY_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(sciproxy_last_error()).find(fmt::format("rank {} of", bad)),
              std::string::npos)
        << sciproxy_last_error();
  }
  sciproxy_specex_psf_free(handle);
}

// The harness's ex2d case on the ranks verifies against one process's reference on rank 0.
TEST(MpiSpecex, HarnessRunsTheCaseOnTheRanks) {
  const auto& comm = world();
  HarnessOptions options;
  options.comm = comm;
  options.repetitions = 1;
  options.measure_roofline = false;
  const CaseSettings settings{{{"nspec", "10"},
                               {"bundlesize", "5"},
                               {"nsubbundles", "1"},
                               {"nwave", "40"},
                               {"wavesize", "20"}}};
  const auto results = run_case(find_case("ex2d"), settings, {kCpu}, options);
  const auto& report = results.front().report;
  if (comm.rank() == 0) {
    ASSERT_TRUE(report.verification.has_value());
    EXPECT_TRUE(report.passed()) << report.verification->summary();
  }
  if (comm.distributed()) {
    ASSERT_TRUE(report.ranks.has_value());
    EXPECT_GT(report.ranks->bytes_exchanged, 0);
  }
}

}  // namespace
}  // namespace sciproxy::test
