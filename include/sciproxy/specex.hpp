// specex: spectroperfectionism extraction of spectra from DESI CCD frames, the job of specter's
// ex2d and gpu_specter (Bolton & Schlegel 2010, PASP 122, 248).
//
//   pixels p = A f            A[p, j]: the pixel-integrated PSF spot of flux bin j (one
//                             spectrum at one wavelength), normalised to sum 1
//   iCov = A^T W A + diag(a^2),   y = A^T W p,   x = iCov^-1 y          (W = diag(ivar))
//   a_j = regularize, or minweight - fluxweight_j where fluxweight_j = sum_p W_pp A_pj is below
//         minweight = 1e-4 max_j fluxweight_j
//   signal mode: Q_b = (C_b)^(-1/2) for each spectrum's diagonal block C_b of C = iCov^-1;
//   noise mode (ndecorr): Q = iCov^(1/2);   s_i = sum_j Q_ij,  R = diag(s)^-1 Q,
//   flux = R x, ivar = s^2, then per Angstrom: flux /= dlambda, ivar *= dlambda^2.
//
// The frame is cut into patches (bundles, subbundles with a neighbour each side, wavelength steps
// with padding), each patch solved on its own and only its core kept. Semantics of specter's
// ex2d (desihub/specter b8490d38); see docs/kernels/specex.md for every rule and where ours
// differ on purpose (the model image, the retry of a failed patch, the checks).
//
// On several ranks (Ex2dOptions::comm) the bundles are split across them in contiguous blocks,
// as gpu_specter's --mpi splits them; each rank extracts its own and the results are gathered,
// the same bits as a one-process run (the model image too: see Ex2dResult::model).
//
// Everything is float64, as specter computes. Long calls stop between patches when asked
// (sciproxy/core/cancel.hpp): they throw Cancelled and their outputs are unspecified.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"

namespace sciproxy::specex {

// One Legendre series per fibre: value(ispec, t) = sum_k coeff[ispec, k] P_k(u), with
// u = (t - lo) * 2 / (hi - lo) - 1 (specter's TraceSet, evaluated the same way).
struct LegendreSet {
  double lo = -1, hi = 1;
  int nspec = 0, ncoeff = 0;
  std::vector<double> coeff;  // (nspec, ncoeff), row-major
  double eval(int ispec, double t) const;
};

// The parameters of the spot, in the order kernels read them (PsfModel::params).
enum PsfParam : int {
  kGhSigX = 0,
  kGhSigY,
  kTailAmp,
  kTailCore,
  kTailXsca,
  kTailYsca,
  kTailInde,
  kFirstGh  // GH-i-j at kFirstGh + i * (ghdegy + 1) + j
};

// A DESI Gauss-Hermite PSF (PSFVER 2 or 3) as read from its FITS file: plain data, the same on
// every backend.
struct PsfModel {
  std::string path;
  int version = 0;  // 2: one table with X and Y as parameters; 3: XTRACE, YTRACE and PSF HDUs
  std::int64_t npix_x = 0, npix_y = 0;
  int nspec = 0;  // FIBERMAX - FIBERMIN + 1
  int hsizex = 0, hsizey = 0, ghdegx = 0, ghdegy = 0;
  double psferr = 0.01;  // header PSFERR when present, else 0.01 as specter (PSFERROR is ignored)
  LegendreSet x, y;      // trace centre x(lambda), y(lambda), each on its own HDU's domain
  LegendreSet w;         // lambda(y): specter's inverse, a Legendre fit of degree ncoeff(y) + 2
  // Every spot parameter (PsfParam order) on one wavelength domain: (nparam, nspec, ncoeff).
  double param_lo = 0, param_hi = 0;
  int param_ncoeff = 0;
  bool has_tail = false;  // the TAIL* parameters are present (else the tail is zero)
  std::vector<double> params;
  // lambda at rows -0.5 and npix_y - 0.5 per fibre, and their extremes (specter's wmin, ...).
  std::vector<double> wmin_spec, wmax_spec;
  double wmin = 0, wmax = 0, wmin_all = 0, wmax_all = 0;

  int nparams() const { return kFirstGh + (ghdegx + 1) * (ghdegy + 1); }
};

// One spot: pixels[iy * nx + ix] covers CCD columns xstart .. xstart+nx-1 and rows ystart ..
// ystart+ny-1 (specter's xslice, yslice, pix). Empty (nx = ny = 0) off the fibre's range.
struct Spot {
  std::int64_t xstart = 0, ystart = 0, nx = 0, ny = 0;
  std::vector<double> pixels;
};

// A pixel rectangle of the CCD: columns [xmin, xmax), rows [ymin, ymax) (specter's xyrange).
struct PixelRange {
  std::int64_t xmin = 0, xmax = 0, ymin = 0, ymax = 0;
  std::int64_t nx() const { return xmax - xmin; }
  std::int64_t ny() const { return ymax - ymin; }
};

// The PSF: loaded once, shared (copies are cheap), immutable.
class Psf {
 public:
  // Reads a Gauss-Hermite PSF FITS file (cfitsio). InvalidArgument naming the file and what is
  // wrong: not FITS, a missing HDU or keyword, a wrong PSFTYPE, degrees that do not match the
  // coefficient arrays, a missing GH-i-j parameter, NaN or infinite coefficients.
  static Psf load(const std::string& path);
  explicit Psf(PsfModel model);  // checks the model as load does

  const PsfModel& model() const { return *model_; }
  int nspec() const { return model_->nspec; }
  std::int64_t npix_x() const { return model_->npix_x; }
  std::int64_t npix_y() const { return model_->npix_y; }
  double wmin() const { return model_->wmin; }
  double wmax() const { return model_->wmax; }

  double x(int ispec, double wavelength) const;
  double y(int ispec, double wavelength) const;
  double wavelength(int ispec, double y) const;  // the approximate inverse, as specter's
  // Gaussian sigma of the spot along the dispersion, in Angstroms (specter's wdisp).
  double wdisp(int ispec, double wavelength) const;
  // Any spot parameter by its name in the file (GHSIGX, GHSIGY, GH-i-j, TAILAMP, TAILCORE,
  // TAILXSCA, TAILYSCA, TAILINDE) at (fibre, wavelength): specter's coeff[name].eval(ispec,
  // wavelength). The TAIL* parameters are 0 for a PSF without a tail.
  double parameter(const std::string& name, int ispec, double wavelength) const;
  // The spot clipped to `bounds` (default: the CCD), coordinates relative to bounds' corner,
  // as specter's xypix(ispec, wavelength, xmin, xmax, ymin, ymax).
  Spot spot(int ispec, double wavelength, std::optional<PixelRange> bounds = {}) const;
  // The pixels that cover spectra [specmin, specmax) between two wavelengths (specter's xyrange).
  PixelRange xyrange(int specmin, int specmax, double wavemin, double wavemax) const;
  // Dense projection matrix A (npix, nspec * nwave), row-major, pixels of `range` in row-major
  // order: image = A phot.
  std::vector<double> projection_matrix(int specmin, int specmax,
                                        std::span<const double> wavelengths,
                                        const PixelRange& range) const;

 private:
  std::shared_ptr<const PsfModel> model_;
};

// Spectra on the CCD: image[range] += sum phot[i, j] spot(specmin + i, wavelength[j]) for the
// wavelengths on the fibre's rows (specter's PSF.project). phot is (nspec, nwave), row-major;
// wavelengths (nwave) are shared by every spectrum. Returns range.ny() x range.nx(), row-major.
std::vector<double> project(const Psf& psf, std::span<const double> wavelengths,
                            std::span<const double> phot, int specmin,
                            std::optional<PixelRange> range = {}, int nparallel = 0);

// A DESI-like preprocessed image simulated from spectra: image = Poisson(A phot) + N(0,
// read_noise^2), ivar = 1 / (max(image, 0) + read_noise^2), mask 0. Deterministic for a seed.
struct SimulatedImage {
  PixelRange range;
  std::vector<double> image, ivar;  // range.ny() x range.nx()
  std::vector<std::int16_t> mask;
  double read_noise = 3;
};
SimulatedImage simulate_image(const Psf& psf, std::span<const double> wavelengths,
                              std::span<const double> phot, int specmin,
                              std::optional<PixelRange> range = {}, double read_noise = 3.0,
                              std::uint64_t seed = 0, int nparallel = 0);

// The image an extraction reads: the whole CCD (range absent: npix_y x npix_x) or a cut-out of
// `range` (specter's xyrange argument). Row-major; ivar 0 marks masked pixels.
struct ImageInput {
  std::span<const double> image, ivar;
  std::int64_t ny = 0, nx = 0;
  std::optional<PixelRange> range;
};

// Where the result goes when the call runs on several ranks (sciproxy/core/communicator.hpp):
// all_ranks (every rank receives the whole result) or root (rank 0 does; the others' arrays are
// empty, as gpu_specter gathers). A bundle's spectra span patches on one rank only, so ex2d keeps
// no per-rank layout (own is refused).
using sciproxy::ResultLayout;

struct Ex2dOptions {
  int bundlesize = 25;
  int nsubbundles = 1;
  int wavesize = 50;  // core wavelength bins per patch (gpu_specter's nwavestep)
  double regularize = 0;
  bool ndecorr = false;  // true: "noise" decorrelation (Q = iCov^1/2); false: "signal" mode
  double pixpad_frac = 0.8;
  double wavepad_frac = 0.2;
  std::optional<double> psferr;  // for chi2pix; absent: the PSF's (PSFERR, else 0.01)
  bool full_output = true;       // chi2pix, pixmask_fraction and the model image
  int nparallel = 0;             // OpenMP threads of the cpu backend; 0: all
  // Called after each bundle with (bundles done, bundles in all): the CLI's progress line.
  void (*progress)(void* context, int done, int total) = nullptr;
  void* progress_context = nullptr;
  // The ranks the call runs on (collective; sciproxy/core/communicator.hpp): the bundles are
  // split across them in contiguous blocks (a rank may have none), each rank extracts its own
  // (progress counts its own bundles), and the results are gathered as result_layout says.
  // Every rank passes the same PSF, image, ivar, wavelengths and options (checked: sizes,
  // values and hashes of the arrays). Without a communicator (the default) the call runs here.
  Communicator comm;
  ResultLayout result_layout = ResultLayout::root;
};

// One patch of the frame (computed by ex2d's plan; see patches()).
struct PatchPlan {
  int speclo = 0, nspec = 0;  // spectra solved: the subbundle with a neighbour each side
  int keeplo = 0, nkeep = 0;  // the core spectra kept, relative to speclo
  std::int64_t iwave = 0;     // first output wavelength bin of the core
  int ncore = 0;              // core wavelength bins
  int nlo = 0, nhi = 0;       // padding bins below and above the core
  double wfirst = 0;          // wavelength of the first (padding) bin
  PixelRange pixels;          // CCD pixels solved
  int nwave() const { return nlo + ncore + nhi; }
  int nflux() const { return nspec * nwave(); }
  std::int64_t npix() const { return pixels.nx() * pixels.ny(); }
};

struct Ex2dResult {
  std::int64_t nspec = 0, nwave = 0;
  int ndiag = 0;
  std::vector<double> flux, ivar;        // (nspec, nwave): electrons per Angstrom
  std::vector<double> resolution;        // (nspec, 2 ndiag + 1, nwave): R[j - ndiag + k, j]
  std::vector<double> chi2pix;           // (nspec, nwave), full_output
  std::vector<double> pixmask_fraction;  // (nspec, nwave), full_output
  // The image's shape, full_output: each bundle's patches' core models summed in patch order,
  // then the bundles' sums added in bundle order (the same on any number of ranks).
  std::vector<double> model;
  std::int64_t npatches = 0;
  std::int64_t retried_patches = 0;  // patches whose Cholesky failed and were solved again with
                                     // regularize = 1e-4
  // On several ranks with ResultLayout::root, ranks other than 0 hold the sizes and counts
  // above but empty arrays.
};

// specter's ndiag: min(max over 3 fibres x 3 wavelengths of round(9 wdisp / dw), spot ny / 2,
// spot nx / 2).
int resolution_ndiag(const Psf& psf, int specmin, int nspec, double dw);

// The patches of an extraction, in the order ex2d solves them. Checks the arguments first.
std::vector<PatchPlan> ex2d_patches(const Psf& psf, const ImageInput& image, int specmin, int nspec,
                                    std::span<const double> wavelengths,
                                    const Ex2dOptions& options = {});

// Flops and bytes of solving these patches (spots, A^T W A, Cholesky, decorrelation).
WorkModel ex2d_work(const std::vector<PatchPlan>& patches, const PsfModel& psf, bool ndecorr);

// Extracts spectra [specmin, specmin + nspec) at `wavelengths` (a linear grid) from the image on
// `device`. `timers` (optional) receives the regions "ex2d/…". Throws InvalidArgument (naming
// the argument), NotCompiled, DeviceUnavailable, OutOfMemory, Cancelled.
Ex2dResult ex2d(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                int nspec, std::span<const double> wavelengths, const Ex2dOptions& options = {},
                Timers* timers = nullptr);

// One patch solved whole, as specter's ex2d_patch: the image covers `range` (default: the
// spectra's xyrange), every bin is kept, no unit conversion.
struct PatchResult {
  std::int64_t nflux = 0;          // nspec * nwave
  std::vector<double> flux, ivar;  // (nspec, nwave)
  std::vector<double> xflux;       // the deconvolved solution x
  std::vector<double> resolution;  // R (nflux, nflux), row-major
  std::vector<double> icov;        // iCov (nflux, nflux)
  PixelRange range;
  bool retried = false;
};
PatchResult ex2d_patch(const Device& device, const Psf& psf, const ImageInput& image, int specmin,
                       int nspec, std::span<const double> wavelengths, double regularize = 0,
                       bool ndecorr = false, Timers* timers = nullptr);

// ---- Files (FITS, cfitsio) ----

// A preprocessed CCD image as DESI writes it: IMAGE (header CAMERA, RDNOISE*), IVAR, MASK; ivar
// is set to 0 where mask != 0. Header cards of IMAGE kept for the frame.
struct PreprocImage {
  std::string path;
  std::int64_t ny = 0, nx = 0;
  std::vector<double> image, ivar;
  std::vector<std::int16_t> mask;
  std::string camera;         // "" when absent
  bool has_fibermap = false;  // a FIBERMAP HDU to copy into the frame
};
PreprocImage read_preproc_image(const std::string& path);
// Writes IMAGE (float32), IVAR (float32), MASK (int16) atomically (a temporary name, renamed).
void write_preproc_image(const std::string& path, const SimulatedImage& image,
                         const std::string& camera = "r0");

// What a frame file holds beyond the extraction: the wavelengths, the fibres and where they
// came from.
struct FrameInfo {
  std::vector<double> wavelengths;
  int specmin = 0;
  std::string camera;
  std::string fibermap_source;  // a FITS file whose FIBERMAP HDU is copied; "" for none
  std::string psf_path, image_path;
};
// FLUX (float32, electron/Angstrom), IVAR, MASK (SOMEBADPIX, ALLBADPIX, BAD2DFIT as desispec),
// WAVELENGTH (float64), RESOLUTION (float32 [nspec, 2 ndiag + 1, nwave]), CHI2PIX, FIBERMAP:
// written to a temporary name in the same directory and renamed when complete.
void write_frame(const std::string& path, const Ex2dResult& result, const FrameInfo& info);
// The model image (float32 IMAGE HDU), written atomically.
void write_model_image(const std::string& path, const Ex2dResult& result, std::int64_t ny,
                       std::int64_t nx);

// gpu_specter's extract_frame: read the image and the PSF, extract, write the frame (and the
// model image when model_path is not empty). Returns the extraction. On several ranks
// (options.comm) every rank reads the files (they must be the same: checked), extracts its
// bundles, and rank 0 alone writes the gathered frame, once, after every rank's part has
// arrived; an error on any rank leaves no file and throws the same error on every rank.
Ex2dResult extract_frame(const Device& device, const std::string& image_path,
                         const std::string& psf_path, const std::string& frame_path,
                         const std::string& model_path, std::span<const double> wavelengths,
                         int specmin, int nspec, const Ex2dOptions& options = {},
                         Timers* timers = nullptr);

// The linear wavelength grid wmin, wmin + dw, ... <= wmax (+ dw/2 of slack), as desispec's
// np.arange(wmin, wmax + dw/2, dw). InvalidArgument for a bad triple.
std::vector<double> wavelength_grid(double wmin, double wmax, double dw);

}  // namespace sciproxy::specex
