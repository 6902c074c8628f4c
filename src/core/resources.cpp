// Threads and memory a call may use (include/sciproxy/core/resources.hpp): read from the CPU
// affinity mask, /proc/meminfo and the process's cgroup (v2 unified or v1 controllers).
#include "sciproxy/core/resources.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"

namespace sciproxy {
namespace {

// A v1 "unlimited" reads as about 2^63; anything beyond a petabyte is no limit.
constexpr double kNoLimit = 1e15;

bool read_text(const std::string& path, std::string& text) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  text = s.str();
  return true;
}

// The first number in a file ("max" and unreadable files give false).
bool read_number(const std::string& path, double& value) {
  std::string text;
  if (!read_text(path, text)) return false;
  std::istringstream in(text);
  return static_cast<bool>(in >> value);
}

// The value of `key` in a "key value" file (memory.stat) or "Key: value kB" (/proc/meminfo).
bool read_field(const std::string& text, const std::string& key, double& value) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    if (fields >> value) return true;
  }
  return false;
}

struct CgroupPaths {
  std::string unified;            // v2: the path of "0::<path>"
  std::string memory_v1, cpu_v1;  // v1: the paths of the memory and cpu controllers
  bool has_unified = false, has_memory_v1 = false, has_cpu_v1 = false;
};

CgroupPaths parse_proc_self_cgroup(const std::string& file) {
  CgroupPaths p;
  std::string text;
  if (!read_text(file, text)) return p;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.substr(0, first) == "0" && controllers.empty()) {
      p.unified = path;
      p.has_unified = true;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (name == "memory") p.memory_v1 = path, p.has_memory_v1 = true;
      if (name == "cpu") p.cpu_v1 = path, p.has_cpu_v1 = true;
    }
  }
  return p;
}

// The directories from the process's own cgroup up to the hierarchy's root: a limit set on a
// parent applies to every child. Inside a container the path is often "/" or names a cgroup
// the container cannot see; the mount's root is always among the candidates.
std::vector<std::string> cgroup_chain(const std::string& mount, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(mount + path);
    path = path.substr(0, path.find_last_of('/'));
  }
  dirs.push_back(mount);
  return dirs;
}

struct CgroupMemory {
  double limit = 0, usage = 0;  // limit 0: none
};

// The tightest limit along the chain, and the usage of the cgroup that sets it, less the page
// cache the kernel would reclaim before failing an allocation (inactive files).
CgroupMemory cgroup_memory(const std::string& root, const CgroupPaths& paths) {
  CgroupMemory best;
  auto consider = [&](const std::string& dir, const char* limit_file, const char* usage_file,
                      const char* inactive_key) {
    double limit = 0, usage = 0;
    if (!read_number(dir + "/" + limit_file, limit) || limit <= 0 || limit >= kNoLimit) return;
    if (!read_number(dir + "/" + usage_file, usage)) return;
    std::string stat;
    double inactive = 0;
    if (read_text(dir + "/memory.stat", stat) && read_field(stat, inactive_key, inactive))
      usage = std::max(0.0, usage - inactive);
    if (best.limit == 0 || limit - usage < best.limit - best.usage) best = {limit, usage};
  };
  if (paths.has_unified)
    for (const auto& dir : cgroup_chain(root, paths.unified))
      consider(dir, "memory.max", "memory.current", "inactive_file ");
  if (paths.has_memory_v1)
    for (const auto& dir : cgroup_chain(root + "/memory", paths.memory_v1))
      consider(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file ");
  return best;
}

// CPUs a cgroup CPU quota allows (rounded up), or 0 for none.
int cgroup_cpus(const std::string& root, const CgroupPaths& paths) {
  int best = 0;
  auto take = [&](double quota, double period) {
    if (quota <= 0 || period <= 0) return;
    const int cpus = std::max(1, static_cast<int>(std::ceil(quota / period)));
    best = best == 0 ? cpus : std::min(best, cpus);
  };
  if (paths.has_unified)
    for (const auto& dir : cgroup_chain(root, paths.unified)) {
      std::string text;
      if (!read_text(dir + "/cpu.max", text)) continue;
      std::istringstream in(text);
      std::string quota;
      double period = 0;
      if (in >> quota >> period && quota != "max") take(std::stod(quota), period);
    }
  if (paths.has_cpu_v1)
    for (const auto& dir : cgroup_chain(root + "/cpu", paths.cpu_v1)) {
      double quota = 0, period = 0;
      if (read_number(dir + "/cpu.cfs_quota_us", quota) &&
          read_number(dir + "/cpu.cfs_period_us", period))
        take(quota, period);
    }
  return best;
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

constexpr const char* kCgroupRoot = "/sys/fs/cgroup";
constexpr const char* kProcSelfCgroup = "/proc/self/cgroup";

}  // namespace

namespace detail {

int usable_cores_under(const std::string& cgroup_root, const std::string& proc_self_cgroup,
                       int affinity) {
  int cores = std::max(affinity, 1);
  const int quota = cgroup_cpus(cgroup_root, parse_proc_self_cgroup(proc_self_cgroup));
  if (quota > 0) cores = std::min(cores, quota);
  return cores;
}

MemoryAvailable available_memory_under(const std::string& proc_meminfo,
                                       const std::string& cgroup_root,
                                       const std::string& proc_self_cgroup) {
  MemoryAvailable m;
  std::string meminfo;
  double kib = 0;
  if (read_text(proc_meminfo, meminfo)) {
    if (read_field(meminfo, "MemTotal:", kib)) m.host_total = kib * 1024;
    if (read_field(meminfo, "MemAvailable:", kib)) {
      m.bytes = kib * 1024;
      m.source = "MemAvailable of /proc/meminfo";
    }
  }
  const CgroupMemory cg = cgroup_memory(cgroup_root, parse_proc_self_cgroup(proc_self_cgroup));
  if (cg.limit > 0) {
    m.cgroup_limit = cg.limit;
    const double headroom = std::max(0.0, cg.limit - cg.usage);
    if (m.source.empty() || headroom < m.bytes) {
      m.bytes = headroom;
      m.source = fmt::format("the cgroup limit of {} less its usage", format_bytes(cg.limit));
    }
  }
  return m;
}

}  // namespace detail

namespace {
std::atomic<int> sharing_processes{1};
}  // namespace

int usable_cores() {
  static const int cores =
      detail::usable_cores_under(kCgroupRoot, kProcSelfCgroup, affinity_cores());
  return std::max(1, cores / sharing_processes.load());
}

void share_cores_with(int processes) {
  sharing_processes = std::max(1, processes);
}

int resolve_threads(long long requested, std::string_view argument) {
  if (requested < 0 || requested > kMaxThreads)
    throw_invalid_argument(
        argument,
        fmt::format("a thread count from 1 to {} (counts above the {} usable cores run on {}), "
                    "or 0 for all cores",
                    kMaxThreads, usable_cores(), usable_cores()),
        fmt::format("{}", requested));
  const int cores = usable_cores();
  return requested == 0 ? cores : std::min(static_cast<int>(requested), cores);
}

std::string format_bytes(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", bytes / kGiB);
  if (bytes >= kMiB) return fmt::format("{:.1f} MiB", bytes / kMiB);
  return fmt::format("{:.1f} KiB", bytes / kKiB);
}

MemoryAvailable available_memory() {
  return detail::available_memory_under("/proc/meminfo", kCgroupRoot, kProcSelfCgroup);
}

void require_memory(double bytes, std::string_view arguments, std::string_view what,
                    std::string_view hint) {
  // Reading the limits costs about 50 us (several files); small calls, which any machine this
  // runs on can hold, do not pay it.
  constexpr double kUncheckedBytes = 256.0 * 1024 * 1024;
  if (bytes < kUncheckedBytes) return;
  const MemoryAvailable m = available_memory();
  if (m.bytes <= 0 || bytes <= m.bytes) return;  // unknown: the allocation itself will tell
  throw OutOfMemory(fmt::format("{}: {} needs about {} of host memory; {} is available ({}){}",
                                arguments, what, format_bytes(bytes), format_bytes(m.bytes),
                                m.source, hint));
}

}  // namespace sciproxy
