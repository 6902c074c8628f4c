// Threads and memory (core/resources.hpp): thread counts checked and capped, the cgroup limits
// read from fake /proc and /sys/fs/cgroup trees (v1 and v2), and require_memory's refusal.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"

using namespace sciproxy;
namespace fs = std::filesystem;

namespace {

// A scratch directory with files written by path, removed at the end of the test.
class FakeTree {
 public:
  FakeTree() {
    root_ =
        fs::temp_directory_path() /
        ("sciproxy-resources-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeTree() { fs::remove_all(root_); }
  std::string path(const std::string& relative) const { return (root_ / relative).string(); }
  void write(const std::string& relative, const std::string& text) const {
    const fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

 private:
  fs::path root_;
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

const char* kMeminfo =
    "MemTotal:       24000000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   20000000 kB\n";

}  // namespace

TEST(Resources, ThreadCountsAreCheckedAndCapped) {
  const int cores = usable_cores();
  ASSERT_GE(cores, 1);
  EXPECT_EQ(resolve_threads(0, "nparallel"), cores);
  EXPECT_EQ(resolve_threads(1, "nparallel"), 1);
  EXPECT_EQ(resolve_threads(kMaxThreads, "nparallel"), cores);  // capped, not refused
  for (long long bad : {-1LL, kMaxThreads + 1LL, 100000LL, 2147483647LL}) {
    try {
      resolve_threads(bad, "nparallel");
      FAIL() << "accepted " << bad;
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("nparallel: expected a thread count from 1 to 4096"), std::string::npos)
          << m;
      EXPECT_NE(m.find("got " + std::to_string(bad)), std::string::npos) << m;
    }
  }
}

TEST(Resources, ThreadCountNeverExceedsTheUsableCores) {
  const int before = omp_get_max_threads();
  {
    ThreadCount t(100000);  // what once crashed the process
    EXPECT_LE(omp_get_max_threads(), usable_cores());
  }
  EXPECT_EQ(omp_get_max_threads(), before);
}

TEST(Resources, HostMemoryWithoutCgroupLimit) {
  FakeTree t;
  t.write("proc/meminfo", kMeminfo);
  t.write("proc/self/cgroup", "0::/\n");
  t.write("cgroup/memory.max", "max\n");
  t.write("cgroup/memory.current", "123\n");
  const MemoryAvailable m = detail::available_memory_under(t.path("proc/meminfo"), t.path("cgroup"),
                                                           t.path("proc/self/cgroup"));
  EXPECT_DOUBLE_EQ(m.bytes, 20000000.0 * 1024);
  EXPECT_DOUBLE_EQ(m.host_total, 24000000.0 * 1024);
  EXPECT_EQ(m.cgroup_limit, 0);
  EXPECT_NE(m.source.find("MemAvailable"), std::string::npos);
}

TEST(Resources, CgroupV2LimitOfAParentApplies) {
  FakeTree t;
  t.write("proc/meminfo", kMeminfo);
  t.write("proc/self/cgroup", "0::/job/step\n");
  t.write("cgroup/job/memory.max", std::to_string(4 * kGiB) + "\n");
  t.write("cgroup/job/memory.current", std::to_string(1.5 * kGiB) + "\n");
  t.write("cgroup/job/memory.stat", "anon 1\ninactive_file " + std::to_string(0.5 * kGiB) + "\n");
  t.write("cgroup/job/step/memory.max", "max\n");
  t.write("cgroup/job/step/memory.current", "0\n");
  const MemoryAvailable m = detail::available_memory_under(t.path("proc/meminfo"), t.path("cgroup"),
                                                           t.path("proc/self/cgroup"));
  // 4 GiB less 1.5 GiB used, of which 0.5 GiB is reclaimable page cache.
  EXPECT_DOUBLE_EQ(m.bytes, 3 * kGiB);
  EXPECT_DOUBLE_EQ(m.cgroup_limit, 4 * kGiB);
  EXPECT_NE(m.source.find("cgroup limit of 4.0 GiB"), std::string::npos) << m.source;
}

TEST(Resources, CgroupV1LimitAndUnlimitedValue) {
  FakeTree t;
  t.write("proc/meminfo", kMeminfo);
  t.write("proc/self/cgroup", "4:memory:/box\n1:cpu,cpuacct:/\n0::/\n");
  t.write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  t.write("cgroup/memory/memory.usage_in_bytes", "100\n");
  t.write("cgroup/memory/box/memory.limit_in_bytes", std::to_string(2 * kGiB) + "\n");
  t.write("cgroup/memory/box/memory.usage_in_bytes", std::to_string(0.5 * kGiB) + "\n");
  const MemoryAvailable m = detail::available_memory_under(t.path("proc/meminfo"), t.path("cgroup"),
                                                           t.path("proc/self/cgroup"));
  EXPECT_DOUBLE_EQ(m.bytes, 1.5 * kGiB);
  EXPECT_DOUBLE_EQ(m.cgroup_limit, 2 * kGiB);
}

TEST(Resources, CgroupCpuQuotasBoundTheCores) {
  FakeTree t;
  t.write("v2/self", "0::/job\n");
  t.write("v2cg/job/cpu.max", "150000 100000\n");  // 1.5 CPUs: 2 threads
  EXPECT_EQ(detail::usable_cores_under(t.path("v2cg"), t.path("v2/self"), 16), 2);
  t.write("v2cg/job/cpu.max", "max 100000\n");
  EXPECT_EQ(detail::usable_cores_under(t.path("v2cg"), t.path("v2/self"), 16), 16);

  t.write("v1/self", "3:cpu,cpuacct:/\n");
  t.write("v1cg/cpu/cpu.cfs_quota_us", "400000\n");
  t.write("v1cg/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(detail::usable_cores_under(t.path("v1cg"), t.path("v1/self"), 16), 4);
  EXPECT_EQ(detail::usable_cores_under(t.path("v1cg"), t.path("v1/self"), 2), 2);  // affinity
  t.write("v1cg/cpu/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(detail::usable_cores_under(t.path("v1cg"), t.path("v1/self"), 16), 16);
}

TEST(Resources, RequireMemoryRefusesWithTheSizesAndTheSource) {
  const MemoryAvailable m = available_memory();
  ASSERT_GT(m.bytes, 0) << "this machine's available memory could not be read";
  EXPECT_NO_THROW(require_memory(1024, "shape", "a tiny grid"));
  try {
    require_memory(m.bytes * 4 + 1e12, "shape, nt", "a huge grid", "; try less");
    FAIL() << "accepted";
  } catch (const OutOfMemory& e) {
    const std::string s = e.what();
    EXPECT_EQ(s.rfind("shape, nt: a huge grid needs about ", 0), 0u) << s;
    EXPECT_NE(s.find("of host memory; "), std::string::npos) << s;
    EXPECT_NE(s.find("is available ("), std::string::npos) << s;
    EXPECT_NE(s.find("; try less"), std::string::npos) << s;
  }
}

TEST(Resources, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "0.5 KiB");
  EXPECT_EQ(format_bytes(3 * 1024.0 * 1024), "3.0 MiB");
  EXPECT_EQ(format_bytes(12.34 * kGiB), "12.3 GiB");
}
