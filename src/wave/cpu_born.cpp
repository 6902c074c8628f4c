// Scalar wave propagator, CPU backend: the Born kernels scalar_born_forward and
// scalar_born_backward (kernels.hpp): the background and scattered fields stepped together,
//   u_sc^{t+1} = v^2 dt^2 W(u_sc) + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 W(u),
// and the exact adjoint of that pair (the drivers of cpu_forward.hpp and cpu_backward.hpp with
// BORN set), for every (ndim, accuracy) of kernels.hpp's table.
#include "cpu_backward.hpp"
#include "cpu_forward.hpp"

namespace sciproxy::wave::kernels::cpu {

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T) {
  (void)context;
  ThreadCount threads(p.nparallel);
  const detail::BornArgs<T> born{sc, scattered_sources, bg_receivers, nullptr};
  with_value<Dimensions>(p.ndim, "ndim", [&](auto ndim) {
    with_value<Accuracies>(p.accuracy, "accuracy", [&](auto accuracy) {
      detail::forward<decltype(ndim)::value, decltype(accuracy)::value, true>(
          p, bg, sources, receivers, static_cast<T*>(nullptr), &born);
    });
  });
}

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T) {
  (void)context;
  ThreadCount threads(p.nparallel);
  const detail::BornArgs<T> born{sc, nullptr, grad_scattered_sources, grad_bg_receivers};
  with_value<Dimensions>(p.ndim, "ndim", [&](auto ndim) {
    with_value<Accuracies>(p.accuracy, "accuracy", [&](auto accuracy) {
      detail::backward<decltype(ndim)::value, decltype(accuracy)::value, true>(
          p, bg, grad_receivers, grad_sources, static_cast<const T*>(nullptr),
          static_cast<T*>(nullptr), &born);
    });
  });
}

template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(double);

}  // namespace sciproxy::wave::kernels::cpu
