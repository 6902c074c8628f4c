// Scalar wave propagator, CPU backend: scalar_forward<double> (cpu_kernels.hpp),
//   u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t
// (docs/kernels/scalar-wave.md), for every (ndim, accuracy) of kernels.hpp's table. One kernel
// and one value type per translation unit: see cpu_kernels.hpp.
#include "cpu_kernels.hpp"

namespace sciproxy::wave::kernels::cpu {

template SCIPROXY_WAVE_SCALAR_FORWARD(double);

}  // namespace sciproxy::wave::kernels::cpu
