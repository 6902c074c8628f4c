// The autotuner's search and its cache (sciproxy/core/autotune.hpp).
#include "sciproxy/core/autotune.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy {

namespace {

nlohmann::json read_cache() {
  std::ifstream f(autotune_cache_path());
  if (!f) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();  // a damaged cache is searched again, not fatal
  }
}

}  // namespace

std::string TuningKey::text() const {
  return fmt::format("{}|{}|{}|threads={}|{}|{}", kernel, cpu_model(), device, threads,
                     precision_name(precision), shape);
}

std::string autotune_cache_path() {
  // The roofline's cache directory: one place for what sciproxy measures about a machine.
  return (std::filesystem::path(roofline_cache_path()).parent_path() / "autotune.json").string();
}

std::optional<TuningParameters> cached_tuning(const TuningKey& key) {
  const nlohmann::json cache = read_cache();
  const auto entry = cache.find(key.text());
  if (entry == cache.end()) return std::nullopt;
  try {
    return entry->at("parameters").get<TuningParameters>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

TuningResult autotune(const TuningKey& key, const std::vector<TuningParameters>& candidates,
                      const std::function<void(const TuningParameters&)>& run, int repeats) {
  require(!candidates.empty(), "candidates", "at least one set of tuning parameters", "none");
  require(repeats >= 1, "repeats", "at least 1", std::to_string(repeats));
  TuningResult result;
  if (auto cached = cached_tuning(key)) {
    result.best = *cached;
    result.from_cache = true;
    return result;
  }
  run(candidates.front());  // warm-up: first touch of buffers, thread start, caches
  for (const TuningParameters& candidate : candidates) {
    double best = 0;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run(candidate);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = r == 0 ? s : std::min(best, s);
    }
    result.trials.push_back({candidate, best});
    if (result.best.empty() || best < result.seconds) {
      result.best = candidate;
      result.seconds = best;
    }
  }
  nlohmann::json cache = read_cache();
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : result.trials)
    trials.push_back({{"parameters", t.parameters}, {"seconds", t.seconds}});
  cache[key.text()] = {
      {"parameters", result.best}, {"seconds", result.seconds}, {"trials", trials}};
  write_cache_file(autotune_cache_path(), cache.dump(2) + "\n");
  return result;
}

}  // namespace sciproxy
