// Scalar wave propagator, CPU backend: the kernel scalar_backward (kernels.hpp), the exact adjoint
// of scalar_forward and the velocity gradient grad_v += lambda 2 v dt^2 W (cpu_backward.hpp), for
// every (ndim, accuracy) of kernels.hpp's table.
#include "cpu_backward.hpp"

namespace sciproxy::wave::kernels::cpu {

template <class T>
SCIPROXY_WAVE_SCALAR_BACKWARD(T) {
  (void)context;
  ThreadCount threads(p.nparallel);
  with_value<Dimensions>(p.ndim, "ndim", [&](auto ndim) {
    with_value<Accuracies>(p.accuracy, "accuracy", [&](auto accuracy) {
      detail::backward<decltype(ndim)::value, decltype(accuracy)::value, false, T>(
          p, fields, grad_receivers, grad_sources, stored, grad_v, nullptr);
    });
  });
}

template SCIPROXY_WAVE_SCALAR_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BACKWARD(double);

}  // namespace sciproxy::wave::kernels::cpu
