// Scalar wave propagator, CPU backend: the kernels of kernels.hpp on the drivers of
// cpu_forward.hpp and cpu_backward.hpp (docs/kernels/scalar-wave.md):
//   scalar_forward       u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t
//   scalar_backward      its exact adjoint, and grad_v += lambda 2 v dt^2 W
//   scalar_born_forward  u_sc^{t+1} = v^2 dt^2 W(u_sc) + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2
//   W(u) scalar_born_backward the exact adjoint of the Born pair
// each for every (ndim, accuracy) of kernels.hpp's table (with_value picks the instantiation once
// per call, outside the time loop).
//
// The explicit instantiations live in one small translation unit per kernel and value type
// (cpu_<kernel>_<type>.cpp): the 12 (ndim, accuracy) instantiations of one kernel for one type
// are what one TU can compile within the build's limit (2 minutes, 2 GB, in every preset,
// sanitizers included, on 2 cores); two types or two kernels per TU were not.
#pragma once

#include "cpu_backward.hpp"
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

}  // namespace sciproxy::wave::kernels::cpu
