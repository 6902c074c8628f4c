// CPU ceilings, cached per machine and thread count: a STREAM-like triad for memory bandwidth
// (McCalpin, https://www.cs.virginia.edu/stream/), streaming reads of a 256 KiB buffer per thread
// for L2 bandwidth (the cache-aware roofline, Ilic et al. 2014), and independent FMA chains for
// the arithmetic peak. The read and FMA kernels are built for several instruction sets
// (target_clones) and the best the CPU supports runs, so the ceilings are the hardware's whatever
// flags the rest of the library used.
#include "sciproxy/core/roofline.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GB/s of a[i] = b[i] + s * c[i], counting 24 bytes per element as STREAM does; best of 5.
double triad_bandwidth_gbs(int threads) {
  const std::size_t n = std::size_t(1) << 25;  // 3 x 256 MiB: far beyond any last-level cache
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::size_t i = 0; i < n; ++i) {  // first touch by the threads that will stream them
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    // Between repetitions: a measurement takes seconds, and Ctrl-C must not wait for it.
    throw_if_cancelled("roofline (triad bandwidth)", rep, 5, "repetitions");
    const auto t0 = std::chrono::steady_clock::now();
    double* __restrict pa = a.get();
    const double* __restrict pb = b.get();
    const double* __restrict pc = c.get();
#pragma omp parallel for simd schedule(static) num_threads(threads)
    for (std::size_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    best = std::min(best, seconds_since(t0));
  }
  if (a[n / 2] != 7.0) throw RuntimeError("roofline: the triad computed a wrong value");
  return 24.0 * n / best * 1e-9;
}

typedef float VecF32 __attribute__((vector_size(64)));
typedef double VecF64 __attribute__((vector_size(64)));

constexpr int kChains = 16;  // independent FMA chains: enough to hide latency on two FMA pipes

// `iterations` rounds over kChains vectors; the sum is returned so that nothing is elided.
template <class V, class T>
__attribute__((always_inline)) inline T fma_chains(long iterations, T seed) {
  constexpr int lanes = sizeof(V) / sizeof(T);
  V acc[kChains];
  V mul, add;
  for (int l = 0; l < lanes; ++l) {
    mul[l] = T(0.999999);
    add[l] = T(1e-7) * seed;
  }
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < lanes; ++l) acc[c][l] = seed + T(c) + T(l);
  for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;
  T sum = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < lanes; ++l) sum += acc[c][l];
  return sum;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) float fma_chains_fp32(
    long iterations, float seed) {
  return fma_chains<VecF32>(iterations, seed);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) double
fma_chains_fp64(long iterations, double seed) {
  return fma_chains<VecF64>(iterations, seed);
}

template <class T>
T fma_chains_dispatch(long iterations, T seed) {
  if constexpr (sizeof(T) == 4)
    return fma_chains_fp32(iterations, seed);
  else
    return fma_chains_fp64(iterations, seed);
}

// Sum of n vectors, repeated: loads with no stores, four independent accumulators.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) float read_vectors(
    const VecF32* data, long n, long repeats) {
  VecF32 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  for (long r = 0; r < repeats; ++r)
    for (long i = 0; i < n; i += 4) {
      s0 += data[i];
      s1 += data[i + 1];
      s2 += data[i + 2];
      s3 += data[i + 3];
    }
  const VecF32 s = s0 + s1 + s2 + s3;
  float total = 0;
  for (int l = 0; l < 16; ++l) total += s[l];
  return total;
}

// L2 and the FMA units are each core's own, so their ceilings for n threads are the sum of each
// thread's best rate over the repetitions, all threads running together. Timing all threads as
// one (the slowest thread of a repetition) let one descheduled thread set the ceiling on a busy
// machine: 2 threads measured 123 GB/s of L2 against 118 for one, and a kernel then ran at 107%
// of its "ceiling". Where threads share a core (SMT), a thread whose sibling was descheduled runs
// faster than both together would, so the ceiling errs high: fractions err low, never above 100%.
template <class Measure>
double sum_of_thread_bests(int threads, int repetitions, const char* what, Measure&& measure) {
  std::vector<double> best(threads, 0.0);
  for (int rep = 0; rep < repetitions; ++rep) {
    throw_if_cancelled(what, rep, repetitions, "repetitions");
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      best[t] = std::max(best[t], measure(t));  // this thread's rate in this repetition
    }
  }
  double total = 0;
  for (const double rate : best) total += rate;
  return total;
}

// GB/s of reading a private 256 KiB buffer per thread: larger than any L1, smaller than any L2
// of the CPUs we run on.
double cache_bandwidth_gbs(int threads) {
  constexpr long kVectors = 256 * 1024 / sizeof(VecF32);
  constexpr long kRepeats = 2000;
  std::vector<float> totals(threads, 0.0f);
  const double gbs = sum_of_thread_bests(threads, 7, "roofline (L2 bandwidth)", [&](int t) {
    std::vector<VecF32> data(kVectors);
    for (auto& v : data)
      for (int l = 0; l < 16; ++l) v[l] = 1.0f;
    read_vectors(data.data(), kVectors, 1);  // into this core's cache
#pragma omp barrier
    const auto t0 = std::chrono::steady_clock::now();
    totals[t] += read_vectors(data.data(), kVectors, kRepeats);
    return static_cast<double>(kVectors * sizeof(VecF32) * kRepeats) / seconds_since(t0) * 1e-9;
  });
  volatile float sink = 0;
  for (const float total : totals) sink = sink + total;
  return gbs;
}

double load_average() {
  double load = 0;
  std::ifstream f("/proc/loadavg");
  f >> load;
  return load;
}

template <class T>
double fma_peak_gflops(int threads) {
  constexpr long lanes = 64 / sizeof(T);
  const long iterations = 20'000'000 / lanes;
  const double flops_per_thread = 2.0 * kChains * lanes * iterations;
  std::vector<T> totals(threads, T(0));
  const double gflops = sum_of_thread_bests(threads, 7, "roofline (FMA peak)", [&](int t) {
#pragma omp barrier
    const auto t0 = std::chrono::steady_clock::now();
    totals[t] += fma_chains_dispatch<T>(iterations, T(1) + t);
    return flops_per_thread / seconds_since(t0) * 1e-9;
  });
  volatile T sink = 0;
  for (const T total : totals) sink = sink + total;
  return gflops;
}

std::string cache_key(const Device& device, int threads) {
  if (device.backend == Backend::cuda) {
    const auto devices = cuda_devices();
    const std::string name =
        device.index < (int)devices.size() ? devices[device.index].name : "GPU";
    return fmt::format("cuda|{}", name);
  }
  return fmt::format("cpu|{}|threads={}", cpu_model(), threads);
}

nlohmann::json read_cache() {
  std::ifstream f(roofline_cache_path());
  if (!f) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();  // a damaged cache is remeasured, not fatal
  }
}

}  // namespace

double last_level_cache_bytes() {  // cpu0's caches in sysfs: the largest
  double largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    std::string size;
    if (!(f >> size) || size.empty()) continue;
    double value = std::atof(size.c_str());
    if (size.back() == 'K') value *= 1024;
    if (size.back() == 'M') value *= 1024 * 1024;
    largest = std::max(largest, value);
  }
  return largest;
}

Roofline measure_cpu_roofline(int threads) {
  if (threads <= 0) threads = max_threads();
  Roofline r;
  r.last_level_cache_bytes = last_level_cache_bytes();
  r.machine = cpu_model();
  r.threads = threads;
  r.load_average = load_average();
  r.bandwidth_gbs = triad_bandwidth_gbs(threads);
  r.cache_bandwidth_gbs = cache_bandwidth_gbs(threads);
  r.peak_gflops_fp32 = fma_peak_gflops<float>(threads);
  r.peak_gflops_fp64 = fma_peak_gflops<double>(threads);
  return r;
}

std::string roofline_cache_path() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* d = std::getenv("SCIPROXY_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = fs::path(x) / "sciproxy";
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = fs::path(h) / ".cache" / "sciproxy";
  else
    dir = fs::temp_directory_path() / "sciproxy";
  return (dir / "roofline.json").string();
}

std::optional<Roofline> cached_roofline(const Device& device, int threads) {
  if (device.backend != Backend::cuda && threads <= 0) threads = max_threads();
  const nlohmann::json cache = read_cache();
  const std::string key = cache_key(device, threads);
  if (!cache.contains(key)) return std::nullopt;
  try {
    Roofline r = roofline_from_json(cache.at(key));
    if (device.backend != Backend::cuda) r.last_level_cache_bytes = last_level_cache_bytes();
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

Roofline measure_and_cache_roofline(const Device& device, int threads) {
  if (device.backend != Backend::cuda && threads <= 0) threads = max_threads();
  const Roofline r = device.backend == Backend::cuda ? measure_cuda_roofline(device.index)
                                                     : measure_cpu_roofline(threads);
  nlohmann::json cache = read_cache();
  cache[cache_key(device, threads)] = to_json(r);
  write_cache_file(roofline_cache_path(), cache.dump(2) + "\n");
  return r;
}

}  // namespace sciproxy
