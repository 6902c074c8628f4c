// Device strings and the run-time choice of backend.
#include "sciproxy/core/device.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"

namespace sciproxy {

std::string Device::name() const {
  switch (backend) {
    case Backend::reference:
      return "reference";
    case Backend::cpu:
      return "cpu";
    case Backend::cuda:
      return fmt::format("cuda:{}", index);
  }
  return "unknown";
}

namespace {
constexpr const char* kAccepted = "one of \"auto\", \"reference\", \"cpu\", \"cuda\", \"cuda:N\"";
}

Device parse_device(std::string_view spec) {
  if (spec == "reference") return {Backend::reference, 0, false};
  if (spec == "cpu") return {Backend::cpu, 0, false};
  if (spec == "cuda") return {Backend::cuda, 0, false};
  if (spec == "auto") return {Backend::cpu, 0, true};  // resolved by select_device
  if (spec.starts_with("cuda:")) {
    const std::string_view digits = spec.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty())
      return {Backend::cuda, index, false};
  }
  throw_invalid_argument("device", kAccepted, fmt::format("\"{}\"", spec));
}

Device select_device(std::string_view spec) {
  Device device = parse_device(spec);
  if (device.automatic) {
    if (cuda_device_count() > 0) device.backend = Backend::cuda;
    return device;
  }
  if (device.backend == Backend::cuda) {
    if (!cuda_compiled())
      throw NotCompiled(
          fmt::format("device \"{}\": the CUDA backend was not compiled into this "
                      "build of sciproxy (configure with the cuda preset)",
                      spec));
    const int count = cuda_device_count();
    if (count == 0)
      throw DeviceUnavailable(fmt::format("device \"{}\": no CUDA device is present ({})", spec,
                                          cuda_unavailable_reason()));
    if (device.index >= count)
      throw DeviceUnavailable(
          fmt::format("device \"{}\": expected a CUDA device index below {}, "
                      "got {}",
                      spec, count, device.index));
  }
  return device;
}

int max_threads() {
  return omp_get_max_threads();
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? double(pages) * double(page_size) : 0.0;
}

ThreadCount::ThreadCount(int threads) : previous_(omp_get_max_threads()) {
  // Never more threads than usable cores (core/resources.hpp), whatever asked for them: the
  // argument, OMP_NUM_THREADS or an earlier omp_set_num_threads.
  const int wanted = threads > 0 ? threads : previous_;
  omp_set_num_threads(std::max(1, std::min(wanted, usable_cores())));
}

ThreadCount::~ThreadCount() {
  omp_set_num_threads(previous_);
}

}  // namespace sciproxy
