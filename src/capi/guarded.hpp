// What every extern "C" wrapper shares: run a body, turn any exception into a sciproxy_status,
// and keep its message for sciproxy_last_error() on the calling thread (defined in capi.cpp).
#pragma once

#include <exception>
#include <new>
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

}  // namespace sciproxy::capi
