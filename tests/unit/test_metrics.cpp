// Work model and rates: hand-computed numbers.
#include <gtest/gtest.h>

#include "core/json.hpp"
#include "sciproxy/core/metrics.hpp"

using namespace sciproxy;

TEST(Metrics, RatesFromWorkAndTime) {
  WorkModel w;
  w.points = 2e9;
  w.flops = 4e9;
  w.bytes = 8e9;
  w.precision = Precision::fp64;
  const Rates r = derive_rates(w, 2.0, std::nullopt);
  EXPECT_DOUBLE_EQ(r.gpoints_per_s, 1.0);
  EXPECT_DOUBLE_EQ(r.gflops_per_s, 2.0);
  EXPECT_DOUBLE_EQ(r.gbytes_per_s, 4.0);
  EXPECT_DOUBLE_EQ(r.intensity, 0.5);
  EXPECT_EQ(r.roofline_fraction, 0.0);  // unknown without a roofline
}

TEST(Metrics, RooflineBoundAndFraction) {
  Roofline roof;
  roof.bandwidth_gbs = 100;
  roof.peak_gflops_fp32 = 1000;
  roof.peak_gflops_fp64 = 500;
  WorkModel w;
  w.flops = 1e9;
  w.bytes = 1e9;  // OI = 1: bandwidth bound at 100 GFlops/s
  w.precision = Precision::fp64;
  Rates r = derive_rates(w, 0.1, roof);  // 10 GFlops/s
  EXPECT_EQ(r.bound, "memory");
  EXPECT_DOUBLE_EQ(r.attainable_gflops, 100);
  EXPECT_DOUBLE_EQ(r.roofline_fraction, 0.1);
  w.bytes = 1e6;  // OI = 1000: compute bound, the fp32 peak applies to fp32 work
  w.precision = Precision::fp32;
  r = derive_rates(w, 0.01, roof);  // 100 GFlops/s
  EXPECT_EQ(r.bound, "compute");
  EXPECT_DOUBLE_EQ(r.attainable_gflops, 1000);
  EXPECT_DOUBLE_EQ(r.roofline_fraction, 0.1);
}

TEST(Metrics, CacheRooflineBindsWhenDeclared) {
  Roofline roof;
  roof.bandwidth_gbs = 100;
  roof.cache_bandwidth_gbs = 400;
  roof.peak_gflops_fp32 = 1000;
  WorkModel w;
  w.flops = 2e9;  // a multiply-add per 4-byte sample read from cache: 0.5 flop per cache byte
  w.bytes = 1e7;
  w.cache_bytes = 4e9;
  w.precision = Precision::fp32;
  Rates r = derive_rates(w, 0.02, roof);  // 100 GFlops/s against a cache bound of 200
  EXPECT_EQ(r.bound, "cache");
  EXPECT_DOUBLE_EQ(r.attainable_gflops, 200);
  EXPECT_DOUBLE_EQ(r.roofline_fraction, 0.5);
  roof.cache_bandwidth_gbs = 0;  // not measured (a GPU): the cache term drops out
  r = derive_rates(w, 0.02, roof);
  EXPECT_EQ(r.bound, "compute");
}

TEST(Metrics, RooflineJsonRoundTrip) {
  Roofline roof;
  roof.machine = "cpu X";
  roof.threads = 2;
  roof.bandwidth_gbs = 30.5;
  roof.cache_bandwidth_gbs = 120;
  roof.peak_gflops_fp64 = 200;
  const Roofline back = roofline_from_json(to_json(roof));
  EXPECT_EQ(back.machine, "cpu X");
  EXPECT_EQ(back.threads, 2);
  EXPECT_DOUBLE_EQ(back.bandwidth_gbs, 30.5);
  EXPECT_DOUBLE_EQ(back.cache_bandwidth_gbs, 120);
  EXPECT_DOUBLE_EQ(back.peak_gflops_fp64, 200);
}

TEST(Roofline, AWorkingSetInTheLastLevelCacheMovesAtCacheSpeed) {
  // Fields that stay in the last-level cache between sweeps are not bound by DRAM: the memory
  // ceiling becomes the cache's (an upper bound of L3's), so the fraction never exceeds 1 for a
  // kernel that runs faster than DRAM allows; without a declared working set, or one too large,
  // DRAM stays the ceiling.
  Roofline roof;
  roof.bandwidth_gbs = 40;
  roof.cache_bandwidth_gbs = 400;
  roof.peak_gflops_fp32 = 1000;
  roof.peak_gflops_fp64 = 500;
  roof.last_level_cache_bytes = 32e6;
  WorkModel w;
  w.flops = 1e9;
  w.bytes = 4e9;  // intensity 0.25
  w.precision = Precision::fp32;
  EXPECT_DOUBLE_EQ(roof.memory_bandwidth_gbs(w), 40);
  EXPECT_DOUBLE_EQ(roof.attainable_gflops(w), 10);
  w.working_set_bytes = 10e6;
  EXPECT_DOUBLE_EQ(roof.memory_bandwidth_gbs(w), 400);
  EXPECT_DOUBLE_EQ(roof.attainable_gflops(w), 100);
  const Rates r = derive_rates(w, 0.02, roof);  // 50 GFlops/s: beyond DRAM's 10
  EXPECT_EQ(r.bound, "cache");
  EXPECT_DOUBLE_EQ(r.roofline_fraction, 0.5);
  w.working_set_bytes = 64e6;  // larger than the cache: DRAM again
  EXPECT_DOUBLE_EQ(roof.attainable_gflops(w), 10);
  EXPECT_EQ(derive_rates(w, 0.2, roof).bound, "memory");
  roof.last_level_cache_bytes = 0;  // a GPU, or an unknown cache
  w.working_set_bytes = 10e6;
  EXPECT_DOUBLE_EQ(roof.memory_bandwidth_gbs(w), 40);
}
