// The autotuner's search and its cache (sciproxy/core/autotune.hpp).
#include "sciproxy/core/autotune.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy {

namespace {

constexpr double kKeepFirstMargin = 0.03;  // autotune.hpp
constexpr int kConfirmPairs = 3;           // autotune.hpp

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
  const auto timed = [&](std::size_t i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(candidates[i]);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Round-robin: every repeat runs each candidate once, so that a change in the machine's load
  // during the search touches all of them alike.
  std::vector<double> fastest(candidates.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r < repeats; ++r)
    for (std::size_t i = 0; i < candidates.size(); ++i) fastest[i] = std::min(fastest[i], timed(i));
  std::size_t chosen = 0;
  for (std::size_t i = 1; i < candidates.size(); ++i)
    if (fastest[i] < fastest[chosen]) chosen = i;
  // The first candidate (the caller's static default) stays unless another beats it by more than
  // the margin: a difference that small is within the noise of a shared machine.
  if (fastest[chosen] > (1 - kKeepFirstMargin) * fastest[0]) chosen = 0;
  // A challenger's best time may be one lucky run (a shared machine's neighbours move a call by up
  // to 2x within minutes): it replaces the default only if it also wins most of kConfirmPairs
  // head-to-head pairs against it by the margin, the order alternating within the pairs.
  if (chosen != 0) {
    int wins = 0;
    for (int pair = 0; pair < kConfirmPairs; ++pair) {
      double t_default, t_challenger;
      if (pair % 2 == 0) {
        t_default = timed(0);
        t_challenger = timed(chosen);
      } else {
        t_challenger = timed(chosen);
        t_default = timed(0);
      }
      fastest[0] = std::min(fastest[0], t_default);
      fastest[chosen] = std::min(fastest[chosen], t_challenger);
      wins += t_challenger < (1 - kKeepFirstMargin) * t_default;
    }
    if (2 * wins < kConfirmPairs) chosen = 0;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    result.trials.push_back({candidates[i], fastest[i]});
  result.best = candidates[chosen];
  result.seconds = fastest[chosen];
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
