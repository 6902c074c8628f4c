// Device hooks for builds without CUDA (Ginkgo's core/device_hooks): every CUDA entry point of
// the core layer exists, reports that CUDA is absent, and throws NotCompiled when asked to work.
#include "diffusion/kernels.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/roofline.hpp"
#include "specex/kernels.hpp"
#include "stack/kernels.hpp"
#include "tti/kernels.hpp"
#include "wave/kernels.hpp"

// The stubs spell the kernels' signatures (kernels.hpp), parameter names included, and read none.
#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace sciproxy {

bool cuda_compiled() {
  return false;
}
int cuda_device_count() {
  return 0;
}
std::vector<CudaDeviceInfo> cuda_devices() {
  return {};
}
std::string cuda_unavailable_reason() {
  return "sciproxy was built without CUDA (configure with the cuda preset)";
}

Roofline measure_cuda_roofline(int) {
  throw NotCompiled("roofline: the CUDA backend was not compiled into this build of sciproxy");
}

}  // namespace sciproxy

namespace sciproxy::tti::kernels::cuda {
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_TTI_FORWARD, "tti")
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_TTI_DEMO_FORWARD, "tti demo")
}  // namespace sciproxy::tti::kernels::cuda

namespace sciproxy::diffusion::kernels::cuda {
SCIPROXY_STUB_KERNEL(SCIPROXY_DIFFUSION_RUN(double, FieldLayout::LevelsContiguous), "diffusion")
SCIPROXY_STUB_KERNEL(SCIPROXY_DIFFUSION_RUN(double, FieldLayout::EntitiesContiguous), "diffusion")
SCIPROXY_STUB_KERNEL(SCIPROXY_DIFFUSION_RUN(float, FieldLayout::LevelsContiguous), "diffusion")
SCIPROXY_STUB_KERNEL(SCIPROXY_DIFFUSION_RUN(float, FieldLayout::EntitiesContiguous), "diffusion")
void release(const void*) noexcept {}  // nothing was mirrored
}  // namespace sciproxy::diffusion::kernels::cuda

namespace sciproxy::specex::kernels::cuda {
SCIPROXY_STUB_KERNEL(SCIPROXY_SPECEX_EXTRACT, "ex2d")
SCIPROXY_STUB_KERNEL(SCIPROXY_SPECEX_SOLVE_PATCH, "ex2d_patch")
}  // namespace sciproxy::specex::kernels::cuda

namespace sciproxy::stack::kernels::cuda {
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_STACK_PARSTACK, "parstack")
}  // namespace sciproxy::stack::kernels::cuda

namespace sciproxy::wave::kernels::cuda {
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_WAVE_SCALAR_FORWARD, "scalar")
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_WAVE_SCALAR_BACKWARD, "scalar")
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_WAVE_SCALAR_BORN_FORWARD, "scalar_born")
SCIPROXY_STUB_FLOAT_KERNEL(SCIPROXY_WAVE_SCALAR_BORN_BACKWARD, "scalar_born")
}  // namespace sciproxy::wave::kernels::cuda
