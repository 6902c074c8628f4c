// Benchmark repetitions, their statistics, and the environment record that goes with them.
#include "sciproxy/core/bench.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/json.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/roofline.hpp"
#include "sciproxy/core/version.hpp"

namespace sciproxy {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

BenchStats run_benchmark(const std::function<double()>& once, int warmup, int repetitions) {
  if (repetitions < 1)
    throw_invalid_argument("repetitions", "at least 1", std::to_string(repetitions));
  if (warmup < 0) throw_invalid_argument("warmup", "0 or more", std::to_string(warmup));
  BenchStats s;
  s.warmup = warmup;
  for (int i = 0; i < warmup; ++i) once();
  for (int i = 0; i < repetitions; ++i) s.seconds.push_back(once());
  s.median = median_of(s.seconds);
  s.min = *std::min_element(s.seconds.begin(), s.seconds.end());
  s.max = *std::max_element(s.seconds.begin(), s.seconds.end());
  s.mean = std::accumulate(s.seconds.begin(), s.seconds.end(), 0.0) / s.seconds.size();
  return s;
}

nlohmann::json to_json(const BenchStats& s) {
  return {{"warmup", s.warmup},   {"repetitions", s.seconds.size()},
          {"seconds", s.seconds}, {"median", s.median},
          {"min", s.min},         {"max", s.max},
          {"mean", s.mean}};
}

std::string environment_json(int threads) {
  return environment_record(threads).dump();
}

nlohmann::json environment_record(int threads) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& d : cuda_devices())
    gpus.push_back({{"index", d.index},
                    {"name", d.name},
                    {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                    {"multiprocessors", d.multiprocessors},
                    {"memory_gib", d.memory_gib}});
  return {{"sciproxy_version", build_info().version},
          {"git_commit", build_info().git_commit},
          {"compiler", build_info().compiler},
          {"flags", build_info().flags},
          {"build_type", build_info().build_type},
          {"cuda_compiled", cuda_compiled()},
          {"cpu_model", cpu_model()},
          {"logical_cpus", static_cast<long>(sysconf(_SC_NPROCESSORS_ONLN))},
          {"threads", threads > 0 ? threads : max_threads()},
          {"gpus", gpus},
          {"host", host},
          {"date", date}};
}

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir))
    throw IoError(fmt::format("{}: the directory {} does not exist", path, dir.string()));
  const fs::path tmp = dir / fmt::format(".{}.tmp{}", target.filename().string(), getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.close();
    if (!f) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw IoError(fmt::format("{}: could not write the file", path));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw IoError(fmt::format("{}: could not write the file ({})", path, ec.message()));
  }
}

void write_cache_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  try {
    write_file_atomically(path, text);
  } catch (const IoError&) {
    // A read-only home or cache directory: the next run measures again.
  }
}

}  // namespace sciproxy
