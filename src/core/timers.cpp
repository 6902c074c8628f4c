// Nested timer regions and their ICON-style report table.
#include "sciproxy/core/timers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/collective.hpp"
#include "core/json.hpp"
#include "sciproxy/core/communicator.hpp"

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

std::string RankTimers::Stat::leaf() const {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

RankTimers RankTimers::gather(const Timers& timers, const Communicator& comm, int root) {
  const auto texts = collective::gather(comm, timers.json(), root);
  RankTimers out;
  out.ranks_ = comm.size();
  if (comm.rank() != root) return out;
  for (int r = 0; r < static_cast<int>(texts.size()); ++r)
    for (const auto& region : nlohmann::json::parse(texts[static_cast<std::size_t>(r)])) {
      const auto path = region.at("name").get<std::string>();
      auto it = std::find_if(out.stats_.begin(), out.stats_.end(),
                             [&](const Stat& s) { return s.path == path; });
      const long calls = region.at("calls").get<long>();
      const double total = region.at("total").get<double>();
      if (it == out.stats_.end()) {
        Stat s;
        s.path = path;
        s.depth = static_cast<int>(std::count(path.begin(), path.end(), '/'));
        s.t_min = region.at("t_min").get<double>();
        s.t_max = region.at("t_max").get<double>();
        s.total_min = s.total_max = total;
        s.rank_of_min = s.rank_of_max = r;
        out.stats_.push_back(s);
        it = out.stats_.end() - 1;
      } else {
        it->t_min = std::min(it->t_min, region.at("t_min").get<double>());
        it->t_max = std::max(it->t_max, region.at("t_max").get<double>());
        if (total < it->total_min) it->total_min = total, it->rank_of_min = r;
        if (total > it->total_max) it->total_max = total, it->rank_of_max = r;
      }
      ++it->ranks;
      it->calls += calls;
      it->total_avg += total;  // the sum for now
    }
  for (Stat& s : out.stats_) {
    s.t_avg = s.calls ? s.total_avg / double(s.calls) : 0.0;
    // Ranks that never opened a region spent no time in it: the minimum is 0 then.
    if (s.ranks < out.ranks_) s.total_min = 0, s.rank_of_min = -1;
    s.total_avg /= double(out.ranks_);
  }
  return out;
}

const RankTimers::Stat* RankTimers::find(std::string_view path) const {
  for (const auto& s : stats_)
    if (s.path == path) return &s;
  return nullptr;
}

std::string RankTimers::table() const {
  std::size_t width = 4;
  for (const auto& s : stats_) width = std::max(width, 2 * s.depth + s.leaf().size());
  const auto rank = [](int r) { return r < 0 ? std::string("(-)") : fmt::format("({})", r); };
  std::string out = fmt::format("{:<{}}  {:>8}  {:>10}  {:>10}  {:>10}  {:>16}  {:>16}  {:>10}\n",
                                "name", width, "# calls", "t_min [s]", "t_avg [s]", "t_max [s]",
                                "total min (rank)", "total max (rank)", "total avg");
  for (const auto& s : stats_)
    out += fmt::format(
        "{:<{}}  {:>8}  {:>10.6f}  {:>10.6f}  {:>10.6f}  {:>10.6f} {:>5}  "
        "{:>10.6f} {:>5}  {:>10.6f}\n",
        std::string(2 * s.depth, ' ') + s.leaf(), width, s.calls, s.t_min, s.t_avg, s.t_max,
        s.total_min, rank(s.rank_of_min), s.total_max, rank(s.rank_of_max), s.total_avg);
  return out;
}

std::string RankTimers::json() const {
  return to_json(*this).dump();
}

nlohmann::json to_json(const RankTimers& timers) {
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& s : timers.stats())
    regions.push_back({{"name", s.path},
                       {"ranks", s.ranks},
                       {"calls", s.calls},
                       {"t_min", s.t_min},
                       {"t_avg", s.t_avg},
                       {"t_max", s.t_max},
                       {"total_min", s.total_min},
                       {"total_min_rank", s.rank_of_min},
                       {"total_max", s.total_max},
                       {"total_max_rank", s.rank_of_max},
                       {"total_avg", s.total_avg}});
  return regions;
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
