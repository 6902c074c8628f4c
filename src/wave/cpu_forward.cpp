// Scalar wave propagator, CPU backend: the kernel scalar_forward (kernels.hpp), the forward
//   u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t
// of cpu_forward.hpp for every (ndim, accuracy) of kernels.hpp's table.
#include "cpu_forward.hpp"

namespace sciproxy::wave::kernels::cpu {

template <class T>
SCIPROXY_WAVE_SCALAR_FORWARD(T) {
  (void)context;
  ThreadCount threads(p.nparallel);
  with_value<Dimensions>(p.ndim, "ndim", [&](auto ndim) {
    with_value<Accuracies>(p.accuracy, "accuracy", [&](auto accuracy) {
      detail::forward<decltype(ndim)::value, decltype(accuracy)::value, false, T>(
          p, fields, sources, receivers, stored, nullptr);
    });
  });
}

template SCIPROXY_WAVE_SCALAR_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_FORWARD(double);

}  // namespace sciproxy::wave::kernels::cpu
