// The backend kernels of the stack family, declared once for every backend (core/dispatch.hpp):
//
//   R[s, k] = R0[s, k] + sum_i w[s,i] * a_i[k + offsetout - offsets[i] - shifts[s,i]]   (method 0)
//   M[s]    = max(m0, max_k R[s, k])                                                (method 1)
//
// (pyrocko.parstack; docs/kernels/parstack.md). api.cpp checks the arguments, resolves the output
// window and hands every backend the same normalised Problem; reference.cpp, cpu.cpp and cuda.cu
// implement the kernels, src/core/cuda_stubs.cpp stands in for cuda.cu in builds without CUDA.
// Private to the library: it also gives the cuda backend the plan's state (ParstackPlan::State).
#pragma once

#include <cstdint>
#include <memory>

#include "core/dispatch.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::stack {

namespace kernels::cuda {
struct PlanResources;  // the device buffers, stream and events of a plan (cuda.cu)
}  // namespace kernels::cuda

// What a ParstackPlan holds. The device side is created by the cuda backend on its first call
// and destroyed through the deleter it installs, so host-only builds never see CUDA types.
struct ParstackPlan::State {
  Counters counters;
  std::unique_ptr<kernels::cuda::PlanResources, void (*)(kernels::cuda::PlanResources*)> device{
      nullptr, nullptr};
};

namespace detail {
// The one way into a plan's state (a friend of ParstackPlan): null for a moved-from plan.
struct ParstackPlanAccess {
  static ParstackPlan::State* state(ParstackPlan& plan) { return plan.state_.get(); }
};
}  // namespace detail

namespace kernels {

template <class T>
struct Problem {
  std::int64_t ntraces = 0, nshifts = 0, lengthout = 0;
  std::int32_t offsetout = 0;
  const T* const* traces = nullptr;       // (ntraces) pointers
  const std::int64_t* lengths = nullptr;  // (ntraces)
  const std::int32_t* offsets = nullptr;  // (ntraces)
  const std::int32_t* shifts = nullptr;   // (nshifts, ntraces)
  const T* weights = nullptr;             // (nshifts, ntraces)
  Method method = Method::stack;
  bool clamp_max_at_zero = false;
  bool accumulate = false;         // method 0: result holds earlier values to add to (else zeros)
  int nparallel = 0;               // OpenMP threads of the cpu backend; 0: all
  std::int64_t chunk_samples = 0;  // cpu backend: output samples per job, a whole number of vectors
};

// Method 0 writes the stack into result (nshifts x lengthout), or adds it to what result holds
// when p.accumulate; method 1 writes result (nshifts). Host pointers in and out on every
// backend. Host backends record the region "compute" and ignore the plan; the cuda backend keeps
// its device buffers in the plan (reused by later calls) and records "upload", "kernel" and
// "download" with CUDA events.
#define SCIPROXY_STACK_PARSTACK(T) \
  void parstack(const Context& ctx, const Problem<T>& p, T* result, ParstackPlan& plan)

// out[c] = argmax_r a[r, c] of a (rows, cols) row-major host array; see stack.hpp's argmax.
#define SCIPROXY_STACK_ARGMAX(T)                                                    \
  void argmax(const Context& ctx, const T* a, std::int64_t rows, std::int64_t cols, \
              std::uint32_t* out, bool pyrocko_compat)

#define SCIPROXY_STACK_KERNELS \
  template <class T>           \
  SCIPROXY_STACK_PARSTACK(T);

SCIPROXY_DECLARE_KERNELS(SCIPROXY_STACK_KERNELS)

// argmax is host-only: the public argmax takes a host array and no Device (pyrocko's argmax is a
// host function, called on the host result of parstack), so it has no cuda kernel, no stub and
// no dispatch; api.cpp calls the cpu one, the tests compare it with the reference.
#define SCIPROXY_STACK_HOST_KERNELS \
  template <class T>                \
  SCIPROXY_STACK_ARGMAX(T);

namespace reference {
SCIPROXY_STACK_HOST_KERNELS
}  // namespace reference
namespace cpu {
SCIPROXY_STACK_HOST_KERNELS
}  // namespace cpu

}  // namespace kernels
}  // namespace sciproxy::stack
