// The backend interface of parstack: declared once, implemented by reference.cpp, cpu.cpp and
// cuda.cu (or cuda_hooks.cpp when CUDA is not built). stack.cpp checks the arguments, resolves the
// output window and hands every backend the same normalised Problem.
#pragma once

#include <cstdint>

#include "sciproxy/core/timers.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::stack::kernels {

template <class T>
struct Problem {
  std::int64_t ntraces = 0, nshifts = 0, lengthout = 0;
  std::int32_t offsetout = 0;
  const T* const* traces = nullptr;        // (ntraces) pointers
  const std::int64_t* lengths = nullptr;   // (ntraces)
  const std::int32_t* offsets = nullptr;   // (ntraces)
  const std::int32_t* shifts = nullptr;    // (nshifts, ntraces)
  const T* weights = nullptr;              // (nshifts, ntraces)
  Method method = Method::stack;
  bool clamp_max_at_zero = false;
  bool accumulate = false;  // method 0: result holds earlier values to add to (else zeros)
};

// Method 0 writes the stack into result (nshifts x lengthout), or adds it to what result holds
// when p.accumulate; method 1 writes result (nshifts).
namespace reference {
template <class T> void parstack(const Problem<T>& p, T* result);
template <class T>
void argmax(const T* a, std::int64_t rows, std::int64_t cols, std::uint32_t* out, bool pyrocko_compat);
}  // namespace reference

namespace cpu {
template <class T> void parstack(const Problem<T>& p, T* result);  // threads: set by the caller
template <class T>
void argmax(const T* a, std::int64_t rows, std::int64_t cols, std::uint32_t* out, bool pyrocko_compat);
}  // namespace cpu

namespace cuda {
// Host pointers in, host result out; device buffers live in `plan` and are reused. Regions
// "upload", "kernel", "download" are recorded in `timers` (CUDA events) when it is not null.
template <class T>
void parstack(const Problem<T>& p, T* result, int device_index, ParstackPlan& plan, Timers* timers);
}  // namespace cuda

}  // namespace sciproxy::stack::kernels
