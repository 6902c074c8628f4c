// Declare once, dispatch once, stub once: the one mechanism every family uses to reach its
// backends (after Ginkgo's GKO_DECLARE_* / exec->run() / core/device_hooks).
//
//  - A family lists its kernels once, in src/<family>/kernels.hpp, as macros that spell one
//    signature each, and SCIPROXY_DECLARE_KERNELS declares them in the namespaces
//    sciproxy::<family>::kernels::{reference, cpu, cuda}. Every kernel takes a Context first.
//  - SCIPROXY_RUN_KERNEL(context, name, args...) calls kernels::<backend>::name for the backend
//    of context.device: the only switch over backends in the library.
//  - Builds without CUDA get the cuda kernels from SCIPROXY_STUB_FLOAT_KERNEL in
//    src/core/cuda_stubs.cpp: every one throws NotCompiled, so every target links in every
//    configuration.
//  - Compile-time specialisations (accuracy, space order, ndim) are listed once per family as a
//    ValueList; with_value() turns the run-time value into the compile-time one.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"

namespace sciproxy {

// What every backend kernel is told about the call besides its data.
struct Context {
  Device device;
  Timers* timers = nullptr;  // regions are recorded here when someone listens (null otherwise)
  int device_index() const { return device.index; }
};

template <Backend B>
using BackendTag = std::integral_constant<Backend, B>;

// Calls op(BackendTag<B>{}) for the backend the device names.
template <class Op>
decltype(auto) on_backend(Backend backend, Op&& op) {
  switch (backend) {
    case Backend::reference:
      return op(BackendTag<Backend::reference>{});
    case Backend::cpu:
      return op(BackendTag<Backend::cpu>{});
    case Backend::cuda:
      return op(BackendTag<Backend::cuda>{});
  }
  throw RuntimeError("internal error: a Device names no known backend");
}

[[noreturn]] void throw_not_compiled(std::string_view kernel);

// A list of the values a compile-time parameter may take, e.g. ValueList<2, 4, 6, 8>.
template <int... Values>
struct ValueList {
  static std::string text();  // "2, 4, 6 or 8"
};

template <int... Values>
std::string ValueList<Values...>::text() {
  std::string s;
  int i = 0;
  constexpr int n = sizeof...(Values);
  ((s += (i == 0 ? "" : (i == n - 1 ? " or " : ", ")) + std::to_string(Values), ++i), ...);
  return s;
}

// Calls fn(std::integral_constant<int, V>{}) for the V of the list equal to value; a value not
// in the list is an InvalidArgument naming `argument`.
template <class List, class Fn>
decltype(auto) with_value(int value, std::string_view argument, Fn&& fn);

namespace detail {
template <class Fn, int First, int... Rest>
decltype(auto) with_value_impl(int value, std::string_view argument, std::string (*text)(),
                               Fn&& fn) {
  if (value == First) return fn(std::integral_constant<int, First>{});
  if constexpr (sizeof...(Rest) > 0) {
    return with_value_impl<Fn, Rest...>(value, argument, text, std::forward<Fn>(fn));
  } else {
    throw_invalid_argument(argument, text(), std::to_string(value));
  }
}
template <class List>
struct WithValue;
template <int... Values>
struct WithValue<ValueList<Values...>> {
  template <class Fn>
  static decltype(auto) call(int value, std::string_view argument, Fn&& fn) {
    // The list's text is built only for the error: with_value may sit in an inner loop.
    return with_value_impl<Fn, Values...>(value, argument, &ValueList<Values...>::text,
                                          std::forward<Fn>(fn));
  }
};
}  // namespace detail

template <class List, class Fn>
decltype(auto) with_value(int value, std::string_view argument, Fn&& fn) {
  return detail::WithValue<List>::call(value, argument, std::forward<Fn>(fn));
}

}  // namespace sciproxy

// Declares the kernels of a family (a macro taking no argument that expands to declarations)
// in the namespaces reference, cpu and cuda of the enclosing namespace.
#define SCIPROXY_DECLARE_KERNELS(declarations) \
  namespace reference {                        \
  declarations                                 \
  }                                            \
  namespace cpu {                              \
  declarations                                 \
  }                                            \
  namespace cuda {                             \
  declarations                                 \
  }

// Runs kernels::<backend>::name(context, args...) for the backend of context.device. Used
// inside the family's namespace, where `kernels` names its kernel namespace.
#define SCIPROXY_RUN_KERNEL(context, name, ...)                             \
  ::sciproxy::on_backend((context).device.backend, [&](auto backend_tag_) { \
    constexpr ::sciproxy::Backend backend_ = decltype(backend_tag_)::value; \
    if constexpr (backend_ == ::sciproxy::Backend::reference)               \
      return kernels::reference::name((context)__VA_OPT__(, ) __VA_ARGS__); \
    else if constexpr (backend_ == ::sciproxy::Backend::cpu)                \
      return kernels::cpu::name((context)__VA_OPT__(, ) __VA_ARGS__);       \
    else                                                                    \
      return kernels::cuda::name((context)__VA_OPT__(, ) __VA_ARGS__);      \
  })

// For src/core/cuda_stubs.cpp: a definition of a templated kernel whose body throws
// NotCompiled, instantiated for float and double. `signature` is a macro of the value type that
// spells the kernel's declaration (the one kernels.hpp declares).
#define SCIPROXY_STUB_FLOAT_KERNEL(signature, kernel_name) \
  template <class T>                                       \
  signature(T) {                                           \
    ::sciproxy::throw_not_compiled(kernel_name);           \
  }                                                        \
  template signature(float);                               \
  template signature(double);

// The same for a kernel that is not a template.
#define SCIPROXY_STUB_KERNEL(signature, kernel_name) \
  signature {                                        \
    ::sciproxy::throw_not_compiled(kernel_name);     \
  }
