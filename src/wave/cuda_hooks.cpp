// Device hooks for builds without CUDA: the CUDA entry points of the scalar propagator exist
// and throw NotCompiled.
#include "scalar_kernels.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::wave::kernels::cuda {

namespace {
[[noreturn]] void not_compiled() {
  throw NotCompiled("scalar: the CUDA backend was not compiled into this build of sciproxy "
                    "(configure with the cuda preset)");
}
}  // namespace

template <class T>
void scalar_forward(const ScalarProblem<T>&, ScalarFields<T>, const T*, T*, T*, int, Timers*) {
  not_compiled();
}

template <class T>
void scalar_backward(const ScalarProblem<T>&, ScalarFields<T>, const T*, T*, const T*, T*, int, Timers*) {
  not_compiled();
}

template <class T>
void scalar_born_forward(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, const T*, const T*, T*, T*,
                         int, Timers*) {
  not_compiled();
}

template <class T>
void scalar_born_backward(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, const T*, const T*, T*, T*,
                          int, Timers*) {
  not_compiled();
}

#define SCIPROXY_INSTANTIATE_BORN(T)                                                                              \
  template void scalar_born_forward<T>(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, const T*,       \
                                       const T*, T*, T*, int, Timers*);                                           \
  template void scalar_born_backward<T>(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, const T*,      \
                                        const T*, T*, T*, int, Timers*);
SCIPROXY_INSTANTIATE_BORN(float)
SCIPROXY_INSTANTIATE_BORN(double)
#undef SCIPROXY_INSTANTIATE_BORN

template void scalar_forward<float>(const ScalarProblem<float>&, ScalarFields<float>, const float*, float*,
                                    float*, int, Timers*);
template void scalar_forward<double>(const ScalarProblem<double>&, ScalarFields<double>, const double*,
                                     double*, double*, int, Timers*);
template void scalar_backward<float>(const ScalarProblem<float>&, ScalarFields<float>, const float*, float*,
                                     const float*, float*, int, Timers*);
template void scalar_backward<double>(const ScalarProblem<double>&, ScalarFields<double>, const double*,
                                      double*, const double*, double*, int, Timers*);

}  // namespace sciproxy::wave::kernels::cuda
