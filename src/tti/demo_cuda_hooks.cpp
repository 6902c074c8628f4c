// Device hooks for builds without CUDA: the CUDA entry point of the TTI workshop demo operator
// exists and throws NotCompiled.
#include "sciproxy/core/error.hpp"
#include "tti/demo_kernels.hpp"

namespace sciproxy::tti::demo::cuda {

template <class T>
void run(const Grid&, const Coefficients<T>&, const Source<T>&, std::int64_t, Fields<T>, TtiDemoForm,
         int, Timers*) {
  throw NotCompiled("tti demo: the CUDA backend was not compiled into this build of sciproxy "
                    "(configure with the cuda preset)");
}

template void run<float>(const Grid&, const Coefficients<float>&, const Source<float>&, std::int64_t,
                         Fields<float>, TtiDemoForm, int, Timers*);
template void run<double>(const Grid&, const Coefficients<double>&, const Source<double>&,
                          std::int64_t, Fields<double>, TtiDemoForm, int, Timers*);

}  // namespace sciproxy::tti::demo::cuda
