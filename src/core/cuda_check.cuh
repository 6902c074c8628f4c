// Checked CUDA calls for the CUDA backends: every runtime call goes through SCIPROXY_CUDA_CHECK
// so a failure surfaces as sciproxy::RuntimeError naming the call and the CUDA error, instead of
// a silent wrong result further on.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::cuda_detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t error, const char* call, const char* file,
                                          int line) {
  throw RuntimeError(std::string("CUDA error: ") + cudaGetErrorString(error) + " (" +
                     cudaGetErrorName(error) + ") in " + call + " at " + file + ":" +
                     std::to_string(line));
}

// DeviceUnavailable naming `kernel` unless device_index is a CUDA device of this machine; checked
// before any runtime call, so that a bad index never reaches cudaSetDevice.
inline void require_device(const char* kernel, int device_index) {
  const int count = cuda_device_count();
  if (count == 0)
    throw DeviceUnavailable(std::string(kernel) + " on cuda:" + std::to_string(device_index) +
                            ": " + cuda_unavailable_reason());
  if (device_index < 0 || device_index >= count)
    throw DeviceUnavailable(std::string(kernel) + ": no CUDA device " +
                            std::to_string(device_index) + " (" + std::to_string(count) +
                            " present)");
}

// Restores the caller's current device on scope exit, so a library call never leaves the
// application on a different GPU than it chose. Errors are ignored in the destructor (it must
// not throw, and at process exit the runtime may already be unloading).
class DeviceGuard {
 public:
  DeviceGuard() {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      previous_ = -1;
      (void)cudaGetLastError();
    }
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace sciproxy::cuda_detail

#define SCIPROXY_CUDA_CHECK(call)                                                                 \
  do {                                                                                            \
    const cudaError_t sciproxy_cuda_error_ = (call);                                              \
    if (sciproxy_cuda_error_ != cudaSuccess)                                                      \
      ::sciproxy::cuda_detail::throw_cuda_error(sciproxy_cuda_error_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations (asynchronous faults show up at the
// next synchronising call, which is checked too).
#define SCIPROXY_CUDA_CHECK_LAUNCH(kernel_name)                                                 \
  do {                                                                                          \
    const cudaError_t sciproxy_cuda_error_ = cudaGetLastError();                                \
    if (sciproxy_cuda_error_ != cudaSuccess)                                                    \
      ::sciproxy::cuda_detail::throw_cuda_error(sciproxy_cuda_error_, "launch of " kernel_name, \
                                                __FILE__, __LINE__);                            \
  } while (0)
