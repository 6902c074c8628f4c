// Benchmark runner in the manner of google/benchmark: warm-up, repetitions, median with min and
// max, and a record of the environment so that figures from two machines can be compared.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sciproxy {

struct BenchStats {
  int warmup = 0;
  std::vector<double> seconds;  // one per repetition
  double median = 0, min = 0, max = 0, mean = 0;
};

// `once` runs the timed work one time and returns its duration in seconds (so a backend may time
// itself with CUDA events). Runs `warmup` untimed calls, then `repetitions` timed ones.
BenchStats run_benchmark(const std::function<double()>& once, int warmup, int repetitions);

double median_of(std::vector<double> values);

// CPU model, threads, GPUs, compiler, flags, build type, git commit, host, date, version, as a
// JSON object. threads: the thread count of the run being recorded (0: the default OpenMP count).
std::string environment_json(int threads = 0);

// Writes `text` to `path` through a temporary file and a rename, so no half-written file is left.
void write_file_atomically(const std::string& path, const std::string& text);

// A cache file (the roofline's, the autotuner's) written atomically, its directory created; one
// that cannot be written only costs measuring again next time, so failure is not an error.
void write_cache_file(const std::string& path, const std::string& text);

}  // namespace sciproxy
