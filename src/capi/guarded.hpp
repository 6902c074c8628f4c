// What every extern "C" wrapper shares: run a body, turn any exception into a sciproxy_status,
// and keep its message for sciproxy_last_error() on the calling thread (defined in capi.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <span>
#include <string>

#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"

namespace sciproxy::capi {

void set_last_error(const std::string& message);

template <class F>
sciproxy_status guarded(F&& body) {
  try {
    body();
    set_last_error("");
    return SCIPROXY_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return static_cast<sciproxy_status>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return SCIPROXY_ERROR_RUNTIME;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SCIPROXY_ERROR_RUNTIME;
  } catch (...) {
    set_last_error("unknown error");
    return SCIPROXY_ERROR_RUNTIME;
  }
}

inline void require_pointer(const void* p, const char* argument) {
  if (!p) throw_invalid_argument(argument, "a non-null pointer", "NULL");
}

// a * b, refusing counts that do not fit (so spans are never formed from wrapped sizes).
inline std::int64_t checked_product(std::int64_t a, std::int64_t b, const char* what) {
  if (a < 0 || b < 0 || (a > 0 && b > std::numeric_limits<std::int64_t>::max() / a))
    throw_invalid_argument(what, "a size that fits in int64", fmt::format("{} x {}", a, b));
  return a * b;
}

// count values at p, which must not be NULL unless count is 0.
template <class T>
std::span<const T> input_span(const T* p, std::int64_t count, const char* argument) {
  if (count == 0) return {};
  require_pointer(p, argument);
  return {p, static_cast<std::size_t>(count)};
}

// count values at p, or none when p is NULL (an optional argument).
template <class T>
std::span<const T> optional_span(const T* p, std::int64_t count) {
  return p && count > 0 ? std::span<const T>(p, static_cast<std::size_t>(count))
                        : std::span<const T>();
}

}  // namespace sciproxy::capi
