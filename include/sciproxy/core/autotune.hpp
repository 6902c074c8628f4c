// Measured choice of a kernel's tuning parameters (tile, chunk, block and batch sizes), as Devito's
// autotuning does: every candidate runs on the caller's own problem, the fastest is kept and
// cached per machine, device, kernel, problem shape, dtype and thread count in
// $SCIPROXY_CACHE_DIR (default ~/.cache/sciproxy)/autotune.json, so the search is paid once.
// Without autotuning a kernel uses its static default, chosen to be good on every shape.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sciproxy/core/metrics.hpp"

namespace sciproxy {

// A kernel's tunables by name, e.g. {"chunk_samples": 4096}.
using TuningParameters = std::map<std::string, std::int64_t>;

struct TuningKey {
  std::string kernel;  // "parstack", "scalar_forward", ...
  std::string device;  // "cpu" or the GPU's name
  std::string shape;   // the sizes that decide the choice, as the kernel writes them
  Precision precision = Precision::fp64;
  int threads = 0;  // resolved thread count (0 for a GPU)

  // "kernel|machine|device|threads=N|fp32|shape": the machine is the CPU model.
  std::string text() const;
};

struct TuningTrial {
  TuningParameters parameters;
  double seconds = 0;  // the fastest of the candidate's timed runs
};

struct TuningResult {
  TuningParameters best;
  double seconds = 0;       // best's time (0 when it came from the cache)
  bool from_cache = false;  // true: no candidate was run
  std::vector<TuningTrial> trials;
};

std::string autotune_cache_path();

// The cached choice for key, or nothing (a damaged cache counts as empty).
std::optional<TuningParameters> cached_tuning(const TuningKey& key);

// The cached choice for key if there is one; otherwise runs every candidate `repeats` times
// through run (after one untimed run of the first, the warm-up; the repeats round-robin over the
// candidates), takes each one's smallest time (noise only adds to a time), keeps the fastest,
// caches and returns it. The first candidate should be the kernel's static default: it is kept
// unless another is more than 3% faster, and then also faster by 3% in at least two of three
// head-to-head pairs with it run after the search, so that noise alone never replaces it. run
// must leave the caller's outputs as a normal call would, as its last call is not necessarily
// the best candidate's.
TuningResult autotune(const TuningKey& key, const std::vector<TuningParameters>& candidates,
                      const std::function<void(const TuningParameters&)>& run, int repeats = 2);

}  // namespace sciproxy
