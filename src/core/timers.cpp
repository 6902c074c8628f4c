// Nested timer regions and their ICON-style report table.
#include "sciproxy/core/timers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/json.hpp"

#ifdef SCIPROXY_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace sciproxy {

std::string Timers::Stat::leaf() const {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Timers::Scope::Scope(Timers* timers, std::string_view name)
    : timers_(timers), start_(std::chrono::steady_clock::now()) {
  if (timers_) timers_->open(name);
#ifdef SCIPROXY_HAVE_NVTX
  nvtxRangePushA(std::string(name).c_str());
#endif
}

Timers::Scope::~Scope() {
#ifdef SCIPROXY_HAVE_NVTX
  nvtxRangePop();
#endif
  if (timers_) timers_->close(elapsed());
}

double Timers::Scope::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

Timers::Stat& Timers::stat_for(const std::string& path, int depth) {
  auto it =
      std::find_if(stats_.begin(), stats_.end(), [&](const Stat& s) { return s.path == path; });
  if (it != stats_.end()) return *it;
  Stat s;
  s.path = path;
  s.depth = depth;
  stats_.push_back(s);
  return stats_.back();
}

void Timers::open(std::string_view name) {
  std::string path = open_.empty() ? std::string(name) : open_.back() + "/" + std::string(name);
  stat_for(path, static_cast<int>(open_.size()));  // keeps parents before children in the table
  open_.push_back(std::move(path));
}

void Timers::close(double seconds) {
  const std::string path = open_.back();
  open_.pop_back();
  Stat& s = stat_for(path, static_cast<int>(open_.size()));
  s.min = s.calls ? std::min(s.min, seconds) : seconds;
  s.max = s.calls ? std::max(s.max, seconds) : seconds;
  s.total += seconds;
  ++s.calls;
}

void Timers::record(std::string_view name, double seconds) {
  open(name);
  close(seconds);
}

const Timers::Stat* Timers::find(std::string_view path) const {
  for (const auto& s : stats_)
    if (s.path == path) return &s;
  return nullptr;
}

std::string Timers::table() const {
  std::size_t width = 4;
  for (const auto& s : stats_) width = std::max(width, 2 * s.depth + s.leaf().size());
  std::string out = fmt::format("{:<{}}  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}\n", "name", width,
                                "# calls", "t_min [s]", "t_avg [s]", "t_max [s]", "total [s]");
  for (const auto& s : stats_) {
    const std::string name = std::string(2 * s.depth, ' ') + s.leaf();
    out += fmt::format("{:<{}}  {:>8}  {:>12.6f}  {:>12.6f}  {:>12.6f}  {:>12.6f}\n", name, width,
                       s.calls, s.min, s.avg(), s.max, s.total);
  }
  return out;
}

std::string Timers::json() const {
  return to_json(*this).dump();
}

nlohmann::json to_json(const Timers& timers) {
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& s : timers.stats())
    regions.push_back({{"name", s.path},
                       {"calls", s.calls},
                       {"t_min", s.min},
                       {"t_avg", s.avg()},
                       {"t_max", s.max},
                       {"total", s.total}});
  return regions;
}

}  // namespace sciproxy
