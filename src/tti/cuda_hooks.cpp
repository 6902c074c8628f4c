// Device hooks for builds without CUDA: the CUDA entry point of the coupled P/M TTI propagator
// exists and throws NotCompiled.
#include "sciproxy/core/error.hpp"
#include "tti_kernels.hpp"

namespace sciproxy::tti::kernels::cuda {

template <class T>
void tti_forward(const TtiProblem<T>&, TtiFields<T>, const T*, T*, int, Timers*) {
  throw NotCompiled("tti: the CUDA backend was not compiled into this build of sciproxy "
                    "(configure with the cuda preset)");
}

template void tti_forward<float>(const TtiProblem<float>&, TtiFields<float>, const float*, float*,
                                 int, Timers*);
template void tti_forward<double>(const TtiProblem<double>&, TtiFields<double>, const double*,
                                  double*, int, Timers*);

}  // namespace sciproxy::tti::kernels::cuda
