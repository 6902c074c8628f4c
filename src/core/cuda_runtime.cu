// The CUDA side of the device layer (cuda_hooks.cpp stands in for it when CUDA is not built):
// device discovery, and the GPU ceilings of the roofline model (Williams, Waterman, Patterson
// 2009): bandwidth with McCalpin's STREAM triad a[i] = b[i] + s*c[i] (3 arrays moved per pass),
// and the fused multiply-add peak from independent FMA chains, 2 flops per FMA.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda_check.cuh"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy {

namespace {

// Clears the runtime's last-error slot, so a probe that found no driver does not poison the
// next checked call with a stale error.
int probe_device_count(cudaError_t* error_out) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (error_out) *error_out = error;
  return count;
}

}  // namespace

bool cuda_compiled() {
  return true;
}

int cuda_device_count() {
  return probe_device_count(nullptr);
}

std::string cuda_unavailable_reason() {
  cudaError_t error = cudaSuccess;
  const int count = probe_device_count(&error);
  if (error != cudaSuccess)
    return std::string("no usable CUDA device: ") + cudaGetErrorString(error);
  if (count == 0) return "no CUDA device found";
  return "";
}

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> devices;
  const int count = cuda_device_count();
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp prop{};
    SCIPROXY_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    CudaDeviceInfo info;
    info.index = index;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    info.memory_gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    devices.push_back(std::move(info));
  }
  return devices;
}

namespace {

class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) { SCIPROXY_CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceMemory() { (void)cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

class EventPair {
 public:
  EventPair() {
    SCIPROXY_CUDA_CHECK(cudaEventCreate(&start_));
    const cudaError_t error = cudaEventCreate(&stop_);
    if (error != cudaSuccess) {
      (void)cudaEventDestroy(start_);
      cuda_detail::throw_cuda_error(error, "cudaEventCreate(&stop_)", __FILE__, __LINE__);
    }
  }
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  void start() { SCIPROXY_CUDA_CHECK(cudaEventRecord(start_)); }
  double stop_seconds() {
    SCIPROXY_CUDA_CHECK(cudaEventRecord(stop_));
    SCIPROXY_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e-3 * ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

constexpr int kThreads = 256;

__global__ void fill_kernel(double2* __restrict__ a, double2* __restrict__ b,
                            double2* __restrict__ c, std::int64_t n2) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n2;
       i += stride) {
    a[i] = make_double2(0.0, 0.0);
    b[i] = make_double2(1.0, 1.0);
    c[i] = make_double2(2.0, 2.0);
  }
}

// 16-byte accesses, one per thread and array: the pattern that reaches the device's bandwidth.
__global__ void triad_kernel(double2* __restrict__ a, const double2* __restrict__ b,
                             const double2* __restrict__ c, double s, std::int64_t n2) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n2;
       i += stride) {
    const double2 bi = b[i];
    const double2 ci = c[i];
    a[i] = make_double2(bi.x + s * ci.x, bi.y + s * ci.y);
  }
}

constexpr int kChains = 8;   // independent FMAs per thread: hides the FMA latency
constexpr int kUnroll = 16;  // FMAs per chain per loop trip: keeps loop overhead under 1%

template <class T>
__device__ __forceinline__ T fused(T x, T a, T b) {
  if constexpr (sizeof(T) == 4) {
    return fmaf(x, a, b);
  } else {
    return fma(x, a, b);
  }
}

// x <- a*x + b converges to b / (1 - a), so values stay finite however long it runs; the sum is
// stored so the compiler cannot drop the chains.
template <class T>
__global__ void fma_kernel(T* __restrict__ out, T a, T b, int trips) {
  T x[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) x[j] = static_cast<T>(threadIdx.x + j) * static_cast<T>(1e-3);
  for (int t = 0; t < trips; ++t) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kChains; ++j) x[j] = fused(x[j], a, b);
    }
  }
  T sum = 0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) sum += x[j];
  out[static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x] = sum;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double measure_bandwidth_gbs() {
  std::size_t free_bytes = 0, total_bytes = 0;
  SCIPROXY_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // ~1 GiB per array: far beyond any L2, so every pass goes to device memory.
  constexpr std::size_t granule = sizeof(double2) * kThreads;
  std::size_t array_bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 4);
  array_bytes -= array_bytes % granule;
  if (array_bytes == 0) throw RuntimeError("measure_cuda_roofline: too little free device memory");
  const std::int64_t n2 = static_cast<std::int64_t>(array_bytes / sizeof(double2));

  DeviceMemory a(array_bytes), b(array_bytes), c(array_bytes);
  const int blocks = static_cast<int>(std::min<std::int64_t>(n2 / kThreads, 1 << 30));
  fill_kernel<<<blocks, kThreads>>>(a.as<double2>(), b.as<double2>(), c.as<double2>(), n2);
  SCIPROXY_CUDA_CHECK_LAUNCH("fill_kernel");

  EventPair events;
  constexpr int warmup = 2, repetitions = 15;
  std::vector<double> seconds;
  for (int r = 0; r < warmup + repetitions; ++r) {
    events.start();
    triad_kernel<<<blocks, kThreads>>>(a.as<double2>(), b.as<double2>(), c.as<double2>(), 3.0, n2);
    SCIPROXY_CUDA_CHECK_LAUNCH("triad_kernel");
    const double t = events.stop_seconds();
    if (r >= warmup) seconds.push_back(t);
  }
  const double bytes = 3.0 * static_cast<double>(array_bytes);
  return bytes / median(seconds) / 1e9;
}

template <class T>
double measure_fma_gflops(const cudaDeviceProp& prop) {
  int blocks_per_sm = 0;
  SCIPROXY_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, fma_kernel<T>, kThreads, 0));
  blocks_per_sm = std::max(blocks_per_sm, 1);
  // Whole waves only, so no SM idles in a tail while the last blocks finish.
  const int blocks = prop.multiProcessorCount * blocks_per_sm * 2;
  const double threads = static_cast<double>(blocks) * kThreads;
  DeviceMemory out(static_cast<std::size_t>(blocks) * kThreads * sizeof(T));
  EventPair events;

  auto run = [&](int trips) {
    events.start();
    fma_kernel<T>
        <<<blocks, kThreads>>>(out.as<T>(), static_cast<T>(0.999999), static_cast<T>(1e-6), trips);
    SCIPROXY_CUDA_CHECK_LAUNCH("fma_kernel");
    return events.stop_seconds();
  };

  // Calibrate to ~50 ms per run: fp64 rates differ 30x between data-centre and consumer GPUs.
  int trips = 64;
  run(trips);
  const double probe = run(trips);
  const double target = 0.05;
  if (probe > 0) {
    const double scaled = trips * target / probe;
    trips = static_cast<int>(std::clamp(scaled, 64.0, static_cast<double>(1 << 24)));
  }
  std::vector<double> seconds;
  constexpr int repetitions = 7;
  run(trips);
  for (int r = 0; r < repetitions; ++r) seconds.push_back(run(trips));
  const double flops = 2.0 * kChains * kUnroll * static_cast<double>(trips) * threads;
  return flops / median(seconds) / 1e9;
}

}  // namespace

Roofline measure_cuda_roofline(int device_index) {
  cuda_detail::require_device("measure_cuda_roofline", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp prop{};
  SCIPROXY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));

  Roofline roof;
  roof.machine = prop.name;
  roof.threads = 0;
  roof.bandwidth_gbs = measure_bandwidth_gbs();
  roof.peak_gflops_fp32 = measure_fma_gflops<float>(prop);
  roof.peak_gflops_fp64 = measure_fma_gflops<double>(prop);
  SCIPROXY_CUDA_CHECK(cudaDeviceSynchronize());
  return roof;
}

}  // namespace sciproxy
