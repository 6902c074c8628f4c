// Scalar wave propagator, CPU backend: scalar_backward<float> (cpu_kernels.hpp),
//   the exact adjoint of scalar_forward, and grad_v += lambda 2 v dt^2 W
// (docs/kernels/scalar-wave.md), for every (ndim, accuracy) of kernels.hpp's table. One kernel
// and one value type per translation unit: see cpu_kernels.hpp.
#include "cpu_kernels.hpp"

namespace sciproxy::wave::kernels::cpu {

template SCIPROXY_WAVE_SCALAR_BACKWARD(float);

}  // namespace sciproxy::wave::kernels::cpu
