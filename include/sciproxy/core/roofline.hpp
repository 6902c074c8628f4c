// Measures this machine's ceilings: memory bandwidth with a STREAM-like triad
// (McCalpin, a[i] = b[i] + s*c[i], 24 bytes per element in fp64) and the fused multiply-add peak
// with independent FMA chains in the widest vectors the compiler targets. Results are cached per
// machine and thread count in $SCIPROXY_CACHE_DIR or ~/.cache/sciproxy/roofline.json.
#pragma once

#include <optional>
#include <string>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"

namespace sciproxy {

std::string cpu_model();
// The CPU's largest cache in bytes (sysfs), 0 where unknown.
double last_level_cache_bytes();

Roofline measure_cpu_roofline(int threads);
Roofline measure_cuda_roofline(int device_index);  // throws NotCompiled without CUDA

// The cached ceilings of this machine at `threads` (or of the GPU), or nothing.
std::optional<Roofline> cached_roofline(const Device& device, int threads);
// Measures and stores in the cache; returns what it measured.
Roofline measure_and_cache_roofline(const Device& device, int threads);
std::string roofline_cache_path();

}  // namespace sciproxy
