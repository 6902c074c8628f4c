// The diffusion granule's cuda backend against the reference (label gpu: skips, saying why,
// where no GPU is present): both field layouts in double precision with pageable host fields
// (staged through pinned buffers) and, in CUDA builds, page-locked host fields (copied
// directly) and device fields (used in place); every configuration branch; single precision
// against double; the finite check on the device; the timer regions; and many granules created
// and destroyed in turn (the device mirror is released with its granule).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "diffusion/granule_setup.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/diffusion.hpp"

#if defined(SCIPROXY_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

using namespace sciproxy::diffusion;
using sciproxy::diffusion::testing::expect_close;
using sciproxy::diffusion::testing::GranuleFields;
using sciproxy::diffusion::testing::GranuleSetup;
using sciproxy::diffusion::testing::make_fields;
using sciproxy::diffusion::testing::make_setup;
using sciproxy::diffusion::testing::rel_l2;
using sciproxy::diffusion::testing::TypedFields;

namespace {

template <class Real>
TypedFields<Real> typed(const GranuleSetup& s, const GranuleFields& in, FieldLayout layout) {
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges;
  const int nlev = s.vertical.num_levels;
  TypedFields<Real> f;
  f.vn = to_layout<Real>(in.vn, ne, nlev, layout);
  f.w = to_layout<Real>(in.w, nc, nlev + 1, layout);
  f.theta_v = to_layout<Real>(in.theta_v, nc, nlev, layout);
  f.exner = to_layout<Real>(in.exner, nc, nlev, layout);
  f.hdef_ic = to_layout<Real>(in.hdef_ic, nc, nlev + 1, layout);
  f.div_ic = to_layout<Real>(in.div_ic, nc, nlev + 1, layout);
  f.dwdx = to_layout<Real>(in.dwdx, nc, nlev + 1, layout);
  f.dwdy = to_layout<Real>(in.dwdy, nc, nlev + 1, layout);
  return f;
}

template <class Real>
GranuleFields untyped(const GranuleSetup& s, const TypedFields<Real>& f, FieldLayout layout) {
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges;
  const int nlev = s.vertical.num_levels;
  GranuleFields out;
  out.vn = from_layout(f.vn, ne, nlev, layout);
  out.w = from_layout(f.w, nc, nlev + 1, layout);
  out.theta_v = from_layout(f.theta_v, nc, nlev, layout);
  out.exner = from_layout(f.exner, nc, nlev, layout);
  out.hdef_ic = from_layout(f.hdef_ic, nc, nlev + 1, layout);
  out.div_ic = from_layout(f.div_ic, nc, nlev + 1, layout);
  out.dwdx = from_layout(f.dwdx, nc, nlev + 1, layout);
  out.dwdy = from_layout(f.dwdy, nc, nlev + 1, layout);
  return out;
}

// Where the caller's fields lie: pageable host memory, page-locked host memory, device memory.
enum class Memory { host, pinned, device };

// calls runs of the granule on `device`, the first an initial run, with the fields in host
// memory or copied to device memory (and back at the end).
template <class Real>
GranuleFields run_granule(const GranuleSetup& s, const GranuleFields& in, DiffusionOptions o,
                          int calls, double dtime, Memory memory = Memory::host,
                          sciproxy::Timers* timers_out = nullptr) {
  o.single_precision = sizeof(Real) == 4;
  Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
  TypedFields<Real> f = typed<Real>(s, in, o.layout);
  std::vector<Real*> ptr;
  for (auto* v : f.all()) ptr.push_back(v->data());
#if defined(SCIPROXY_HAVE_CUDA)
  if (memory != Memory::host) {
    for (std::size_t i = 0; i < ptr.size(); ++i) {
      const std::size_t bytes = f.all()[i]->size() * sizeof(Real);
      void* d = nullptr;
      if (memory == Memory::device) {
        EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(d, ptr[i], bytes, cudaMemcpyHostToDevice), cudaSuccess);
      } else {
        EXPECT_EQ(cudaMallocHost(&d, bytes), cudaSuccess);
        std::memcpy(d, ptr[i], bytes);
      }
      ptr[i] = static_cast<Real*>(d);
    }
  }
#else
  EXPECT_TRUE(memory == Memory::host) << "device and page-locked memory need a CUDA build";
#endif
  DiffusionPrognosticFields<Real> p{ptr[0], ptr[1], ptr[2], ptr[3]};
  DiffusionDiagnosticFields<Real> d{ptr[4], ptr[5], ptr[6], ptr[7]};
  for (int i = 0; i < calls; ++i) granule.run(d, p, dtime, i == 0);
#if defined(SCIPROXY_HAVE_CUDA)
  if (memory != Memory::host) {
    for (std::size_t i = 0; i < ptr.size(); ++i) {
      const std::size_t bytes = f.all()[i]->size() * sizeof(Real);
      if (memory == Memory::device) {
        EXPECT_EQ(cudaMemcpy(f.all()[i]->data(), ptr[i], bytes, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(cudaFree(ptr[i]), cudaSuccess);
      } else {
        std::memcpy(f.all()[i]->data(), ptr[i], bytes);
        EXPECT_EQ(cudaFreeHost(ptr[i]), cudaSuccess);
      }
    }
  }
#endif
  if (timers_out) *timers_out = granule.timers();
  return untyped(s, f, o.layout);
}

constexpr double kDtime = 900.0;  // Smagorinsky on at R2B3's spacing (as test_diffusion_granule)

}  // namespace

class DiffusionCuda : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_ = new GranuleSetup(make_setup(2, 3, 12));
    fields_ = new GranuleFields(make_fields(*setup_, 7));
  }
  static void TearDownTestSuite() {
    delete setup_;
    delete fields_;
  }
  void SetUp() override {
    if (sciproxy::cuda_device_count() == 0) GTEST_SKIP() << sciproxy::cuda_unavailable_reason();
  }
  static GranuleSetup* setup_;
  static GranuleFields* fields_;
};
GranuleSetup* DiffusionCuda::setup_ = nullptr;
GranuleFields* DiffusionCuda::fields_ = nullptr;

TEST_F(DiffusionCuda, MatchesReferenceInBothLayoutsWithHostFields) {
  for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    DiffusionOptions ref, gpu;
    ref.device = "reference", gpu.device = "cuda";
    ref.layout = gpu.layout = layout;
    const GranuleFields want = run_granule<double>(*setup_, *fields_, ref, 3, kDtime);
    const GranuleFields got = run_granule<double>(*setup_, *fields_, gpu, 3, kDtime);
    // The same expressions; nvcc contracts a * b + c into FMAs where the host compiler may not,
    // so the last bits differ: far below 1e-12 after three calls.
    expect_close(
        got, want, 1e-12,
        layout == FieldLayout::LevelsContiguous ? "levels contiguous" : "entities contiguous");
  }
}

TEST_F(DiffusionCuda, DeviceFieldsAreUsedInPlace) {
#if !defined(SCIPROXY_HAVE_CUDA)
  GTEST_SKIP() << "device memory needs a CUDA build";
#else
  for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    DiffusionOptions ref, gpu;
    ref.device = "reference", gpu.device = "cuda";
    ref.layout = gpu.layout = layout;
    const GranuleFields want = run_granule<double>(*setup_, *fields_, ref, 3, kDtime);
    const GranuleFields got =
        run_granule<double>(*setup_, *fields_, gpu, 3, kDtime, Memory::device);
    expect_close(
        got, want, 1e-12,
        layout == FieldLayout::LevelsContiguous ? "levels contiguous" : "entities contiguous");
  }
#endif
}

TEST_F(DiffusionCuda, PageLockedHostFieldsAreCopiedDirectly) {
#if !defined(SCIPROXY_HAVE_CUDA)
  GTEST_SKIP() << "page-locked memory needs a CUDA build";
#else
  for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    DiffusionOptions ref, gpu;
    ref.device = "reference", gpu.device = "cuda";
    ref.layout = gpu.layout = layout;
    const GranuleFields want = run_granule<double>(*setup_, *fields_, ref, 3, kDtime);
    const GranuleFields got =
        run_granule<double>(*setup_, *fields_, gpu, 3, kDtime, Memory::pinned);
    expect_close(
        got, want, 1e-12,
        layout == FieldLayout::LevelsContiguous ? "levels contiguous" : "entities contiguous");
  }
#endif
}

TEST_F(DiffusionCuda, EveryConfigurationBranchMatchesReference) {
  // The groups each kernel skips or runs: shear types, each field's diffusion switched off.
  for (int variant = 0; variant < 6; ++variant) {
    GranuleSetup s = *setup_;
    switch (variant) {
      case 0:
        s.config.shear_type = 0;
        break;
      case 1:
        s.config.shear_type = 1;
        break;
      case 2:
        s.config.apply_to_temperature = false;
        break;
      case 3:
        s.config.apply_to_vertical_wind = false;
        break;
      case 4:
        s.config.apply_to_horizontal_wind = false;
        break;
      default:
        s.config.apply_zdiffusion_t = false;
        break;
    }
    for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
      DiffusionOptions ref, gpu;
      ref.device = "reference", gpu.device = "cuda";
      ref.layout = gpu.layout = layout;
      expect_close(run_granule<double>(s, *fields_, gpu, 2, kDtime),
                   run_granule<double>(s, *fields_, ref, 2, kDtime), 1e-12,
                   "variant " + std::to_string(variant));
    }
  }
}

TEST_F(DiffusionCuda, SinglePrecisionFollowsDouble) {
  DiffusionOptions o;
  o.device = "cuda";
  const GranuleFields d = run_granule<double>(*setup_, *fields_, o, 1, kDtime);
  const GranuleFields f = run_granule<float>(*setup_, *fields_, o, 1, kDtime);
  // The bounds of the cpu backend's test (test_diffusion_granule.cpp), for the same reason: the
  // tendencies are differences of neighbouring values and keep about 5 of float's 7 digits.
  // Measured on an H100: 2.8e-6 for theta_v, 1.5e-6 for exner, as on the cpu.
  EXPECT_LE(rel_l2(f.vn, d.vn), 1e-5);
  EXPECT_LE(rel_l2(f.theta_v, d.theta_v), 1e-5);
  EXPECT_LE(rel_l2(f.exner, d.exner), 1e-5);
  EXPECT_LE(rel_l2(f.w, d.w), 1e-4);
  EXPECT_LE(rel_l2(f.div_ic, d.div_ic), 1e-3);
}

TEST_F(DiffusionCuda, NonFiniteFieldsAreRefusedNamingFieldAndIndex) {
  DiffusionOptions o;
  o.device = "cuda";
  Diffusion g(setup_->grid, setup_->config, setup_->vertical, setup_->metrics,
              setup_->interpolation, setup_->edges, setup_->cells, o);
  GranuleFields f = *fields_;
  f.theta_v[17] = NAN;
  DiffusionPrognosticFields<double> p{f.vn.data(), f.w.data(), f.theta_v.data(), f.exner.data()};
  DiffusionDiagnosticFields<double> d{f.hdef_ic.data(), f.div_ic.data(), f.dwdx.data(),
                                      f.dwdy.data()};
  const std::vector<double> vn_before = f.vn;
  try {
    g.run(d, p, kDtime);
    ADD_FAILURE() << "NaN theta_v accepted";
  } catch (const sciproxy::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("prognostic.theta_v"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("17"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.vn, vn_before);  // refused before anything was written
}

TEST_F(DiffusionCuda, TimersHaveTheRegionsOfTheCpuBackend) {
  DiffusionOptions o;
  o.device = "cuda";
  sciproxy::Timers timers;
  run_granule<double>(*setup_, *fields_, o, 2, kDtime, Memory::host, &timers);
  for (const char* name : {"rbf_vn", "smagorinsky", "rbf_nabla2_turbulence_nabla2_w", "vn_w",
                           "theta_exner", "upload", "download"}) {
    const sciproxy::Timers::Stat* stat = nullptr;
    for (const auto& st : timers.stats())
      if (st.leaf() == name) stat = &st;
    ASSERT_NE(stat, nullptr) << name << "\n" << timers.table();
    EXPECT_EQ(stat->calls, 2) << name;
    EXPECT_GE(stat->min, 0.0) << name;
  }
}

TEST_F(DiffusionCuda, ManyGranulesInTurnGiveTheSameAnswer) {
  // Each granule's device mirror is released with it; a later granule at the same address must
  // not find a stale one.
  DiffusionOptions o;
  o.device = "cuda";
  const GranuleFields first = run_granule<double>(*setup_, *fields_, o, 1, kDtime);
  GranuleSetup other = *setup_;
  other.config.shear_type = 0;
  for (int i = 0; i < 4; ++i) {
    run_granule<double>(other, *fields_, o, 1, kDtime);
    expect_close(run_granule<double>(*setup_, *fields_, o, 1, kDtime), first, 0.0,
                 "granule " + std::to_string(i));
  }
}
