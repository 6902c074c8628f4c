// Device hooks for builds without CUDA: the plan is empty and the CUDA kernel throws NotCompiled.
#include "parstack_kernels.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::stack {

struct ParstackPlan::Impl {};

ParstackPlan::ParstackPlan() = default;
ParstackPlan::~ParstackPlan() = default;
ParstackPlan::ParstackPlan(ParstackPlan&&) noexcept = default;
ParstackPlan& ParstackPlan::operator=(ParstackPlan&&) noexcept = default;
ParstackPlan::Counters ParstackPlan::counters() const { return {}; }

namespace kernels::cuda {

template <class T>
void parstack(const Problem<T>&, T*, int, ParstackPlan&, Timers*) {
  throw NotCompiled("parstack: the CUDA backend was not compiled into this build of sciproxy "
                    "(configure with the cuda preset)");
}

template void parstack<float>(const Problem<float>&, float*, int, ParstackPlan&, Timers*);
template void parstack<double>(const Problem<double>&, double*, int, ParstackPlan&, Timers*);

}  // namespace kernels::cuda
}  // namespace sciproxy::stack
