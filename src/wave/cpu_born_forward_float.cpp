// Scalar wave propagator, CPU backend: scalar_born_forward<float> (cpu_kernels.hpp),
//   u_sc^{t+1} = v^2 dt^2 W(u_sc) + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 W(u)
// (docs/kernels/scalar-wave.md), for every (ndim, accuracy) of kernels.hpp's table. One kernel
// and one value type per translation unit: see cpu_kernels.hpp.
#include "cpu_kernels.hpp"

namespace sciproxy::wave::kernels::cpu {

template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(float);

}  // namespace sciproxy::wave::kernels::cpu
