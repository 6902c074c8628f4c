// Run-time choice of backend: "reference", "cpu", "cuda", "cuda:N" or "auto".
// Only "auto" falls back (to cpu when CUDA was not built or no GPU is present); an explicit
// request that cannot be met throws NotCompiled or DeviceUnavailable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sciproxy {

enum class Backend { reference, cpu, cuda };

struct Device {
  Backend backend = Backend::cpu;
  int index = 0;           // CUDA device ordinal; 0 for the host backends
  bool automatic = false;  // chosen by "auto" rather than asked for by name

  std::string name() const;  // "reference", "cpu", "cuda:0"
  bool operator==(const Device& other) const {
    return backend == other.backend && index == other.index;
  }
};

// Parses a device string without looking at the hardware. Throws InvalidArgument on a bad string.
Device parse_device(std::string_view spec);

// Parses and checks that the device can run here; "auto" picks cuda:0 when built and present.
Device select_device(std::string_view spec);

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  double memory_gib = 0;
};

bool cuda_compiled();                        // was the CUDA backend built?
int cuda_device_count();                     // 0 when not built or no GPU
std::vector<CudaDeviceInfo> cuda_devices();  // empty when not built or no GPU
std::string cuda_unavailable_reason();       // why cuda_device_count() is 0, for messages

int max_threads();  // OpenMP threads a parallel region gets by default

double physical_memory_bytes();  // of this host; 0 when unknown

// Sets the OpenMP thread count for the lifetime of the object (nparallel arguments), then restores
// it. The count is capped at usable_cores() (core/resources.hpp); arguments are checked with
// resolve_threads() where they enter the library.
class ThreadCount {
 public:
  explicit ThreadCount(int threads);  // threads <= 0: the current count (capped)
  ~ThreadCount();
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int previous_;
};

}  // namespace sciproxy
