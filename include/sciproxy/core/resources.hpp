// Bounded resources, checked before any work starts: the threads a call may use and the memory
// it may allocate. Every family's entry points go through these, so a thread count of 100000
// or a grid larger than the machine gets a clear error instead of a crash or the OOM killer.
//
// Threads: 0 means every core this process may use; 1 .. kMaxThreads is capped at that number
// (more OpenMP threads than cores only slow these kernels down, and a count the system cannot
// create ends the process inside the OpenMP runtime); anything else is refused.
//
// Memory: what a call needs is estimated by its family before allocating and compared with
// what the process may still allocate: the kernel's MemAvailable (/proc/meminfo) and, in a
// container, the cgroup's limit less its usage (cgroup v2 memory.max / memory.current, or v1
// memory.limit_in_bytes / memory.usage_in_bytes), whichever is smaller.
#pragma once

#include <string>
#include <string_view>

namespace sciproxy {

// The largest thread count any entry point accepts (nparallel, threads, --threads).
constexpr int kMaxThreads = 4096;

// Cores this process may run on: its CPU affinity mask, bounded by a cgroup CPU quota (cpu.max,
// or v1 cpu.cfs_quota_us / cpu.cfs_period_us) when there is one. At least 1.
int usable_cores();
// Several processes of one program on this node (MPI ranks whose CPU sets overlap): from now on
// usable_cores() is this process's share, so "all cores" does not oversubscribe the node.
void share_cores_with(int processes);

// The thread count a call runs with: 0 -> usable_cores(); 1..kMaxThreads -> at most
// usable_cores(); otherwise InvalidArgument naming `argument`.
int resolve_threads(long long requested, std::string_view argument);

struct MemoryAvailable {
  double bytes = 0;         // what may still be allocated; 0 when nothing could be read
  double host_total = 0;    // MemTotal
  double cgroup_limit = 0;  // 0 when no cgroup limit applies
  std::string source;       // "MemAvailable", "the cgroup limit less its usage"
};

MemoryAvailable available_memory();

// Refuses, before allocating, a call that needs more host memory than available_memory()
// (requests below 256 MiB are let through unread)
// (OutOfMemory): "<arguments>: <what> needs about 12.3 GiB of host memory; 8.1 GiB is
// available (...)<hint>". `arguments` names the arguments that set the size ("shape, nt"),
// `what` says what is sized ("a 3-D grid of 1000 x 1000 x 1000 cells, 4 shots, float32").
void require_memory(double bytes, std::string_view arguments, std::string_view what,
                    std::string_view hint = {});

std::string format_bytes(double bytes);  // "12.3 GiB", "4.0 MiB", "0.5 KiB"

namespace detail {
// The same, read under other roots (tests give fake /proc and /sys/fs/cgroup trees).
int usable_cores_under(const std::string& cgroup_root, const std::string& proc_self_cgroup,
                       int affinity_cores);
MemoryAvailable available_memory_under(const std::string& proc_meminfo,
                                       const std::string& cgroup_root,
                                       const std::string& proc_self_cgroup);
}  // namespace detail

}  // namespace sciproxy
