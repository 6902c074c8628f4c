// Work model and rates. Every kernel call declares what it must do (points updated, flops,
// compulsory bytes); this file derives every rate from that and a time, in one place.
// Roofline (Williams, Waterman, Patterson 2009): attainable = min(peak flops, OI * bandwidth),
// with the cache-aware ceiling of Ilic, Pratas and Sousa (2014) where a kernel declares the bytes
// it must stream from cache: a kernel that re-reads inputs from L2 on every step (parstack reads
// one trace sample per multiply-add) is bound by L2 bandwidth long before DRAM or FMA limits.
#pragma once

#include <optional>
#include <string>

namespace sciproxy {

enum class Precision { fp32, fp64 };
const char* precision_name(Precision p);

struct WorkModel {
  double points = 0;  // points updated, or multiply-adds where point_unit is "MAC"
  // "Pts" (GPts/s), "MAC" (GMAC/s), or a unit counted in items too few for giga-rates
  // ("patches": patches/s); see display_rate.
  std::string point_unit = "Pts";
  double flops = 0;        // floating-point operations the implemented expressions do
  double bytes = 0;        // compulsory bytes: each input read once, each output written once
  double cache_bytes = 0;  // bytes the algorithm streams from cache (0: not declared)
  // Bytes the kernel keeps touching from one sweep to the next (its fields); when they fit the
  // last-level cache, the compulsory bytes move at cache speed, not DRAM's (0: not declared).
  double working_set_bytes = 0;
  Precision precision = Precision::fp64;

  double intensity() const { return bytes > 0 ? flops / bytes : 0.0; }  // flop per byte
};

// The ceilings of one machine at one thread count (or one GPU), measured by roofline.hpp.
struct Roofline {
  std::string machine;             // CPU model or GPU name
  int threads = 0;                 // 0 for a GPU
  double bandwidth_gbs = 0;        // STREAM-like triad, GB/s (1e9 bytes)
  double cache_bandwidth_gbs = 0;  // streaming reads of an L2-resident buffer; 0 for a GPU
  double peak_gflops_fp32 = 0;
  double peak_gflops_fp64 = 0;
  double load_average = 0;  // of the machine while it was measured: high means low ceilings
  double last_level_cache_bytes = 0;  // of the CPU (sysfs; not cached with the ceilings); 0: GPU

  // The bandwidth the compulsory bytes move at: DRAM's, or the cache's when the work's working
  // set fits the last-level cache. The cache ceiling measured is L2's reads, an upper bound of
  // L3's, so the fraction of it is never above what the machine can do.
  double memory_bandwidth_gbs(const WorkModel& work) const;

  double peak_gflops(Precision p) const {
    return p == Precision::fp32 ? peak_gflops_fp32 : peak_gflops_fp64;
  }
  // min(peak, OI * bandwidth[, cache OI * cache bandwidth]) for the work of a kernel.
  double attainable_gflops(const WorkModel& work) const;
};

struct Rates {
  double seconds = 0;
  double gpoints_per_s = 0;  // GPts/s or GMAC/s, as the work model's point_unit says
  double gflops_per_s = 0;
  double gbytes_per_s = 0;
  double intensity = 0;           // flop per compulsory byte
  double attainable_gflops = 0;   // roofline bound of this work; 0 when no roofline is known
  double roofline_fraction = 0;   // achieved / attainable; 0 when no roofline is known
  std::string bound = "unknown";  // which ceiling binds: "compute", "memory", "cache"
};

Rates derive_rates(const WorkModel& work, double seconds, const std::optional<Roofline>& roof);

// The point rate as people read it: GPts/s, GMAC/s, or items per second for other units.
struct DisplayRate {
  double value = 0;
  std::string unit;
};
DisplayRate display_rate(const WorkModel& work, double gpoints_per_s);

}  // namespace sciproxy
