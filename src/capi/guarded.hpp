// What every extern "C" wrapper shares (the convention of include/sciproxy/c/core.h): run a body,
// turn any exception into a sciproxy_status and keep its message for sciproxy_last_error() on the
// calling thread (core.cpp); read an options struct, checking its struct_size.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/sciproxy.h"

namespace sciproxy::capi {

void set_last_error(const std::string& message);

// sciproxy_agree_status (c/core.h) with the local failure's message given (core.cpp).
sciproxy_status agree_status(std::int64_t comm, sciproxy_status local, std::string message);

// Every C entry point's body runs in here: nothing escapes, not even std::bad_alloc, since a
// C or Fortran caller has no way to catch it.
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
    return SCIPROXY_ERROR_OUT_OF_MEMORY;
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

// The caller's options, or the defaults (fill) when it passed NULL. A struct_size other than
// this library's is refused: the caller was built against another layout. When a field is
// added, the sizes of earlier layouts are accepted here by copying their prefix over defaults.
template <class COptions>
COptions read_options(const COptions* options, void (*fill)(COptions*), const char* name) {
  COptions o;
  fill(&o);
  if (!options) return o;
  if (options->struct_size != sizeof(COptions))
    throw_invalid_argument(
        "options.struct_size",
        fmt::format("{} (sizeof({}) of this library: fill the options with {}_default first)",
                    sizeof(COptions), name, name),
        std::to_string(options->struct_size));
  return *options;
}

// The device an options struct names (NULL is refused, as a NULL device argument was).
inline Device device_of(const char* device) {
  require_pointer(device, "device");
  return select_device(device);
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

// A library output into the caller's array (nothing when the output is empty).
template <class T>
void copy_out(const std::vector<T>& from, T* to, const char* argument) {
  if (from.empty()) return;
  require_pointer(to, argument);
  std::copy(from.begin(), from.end(), to);
}

}  // namespace sciproxy::capi
