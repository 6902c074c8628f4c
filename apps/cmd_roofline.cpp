// `sciproxy roofline`: the cached ceilings of this machine, measured when absent or when asked.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy::app {

namespace {

struct RooflineOptions {
  int threads = 0;
  std::string device = "cpu";
  bool remeasure = false;
};

int run_roofline(const RooflineOptions& opt) {
  check_threads(opt.threads);
  const Device device = select_device_option(opt.device);
  if (device.automatic || device.backend == Backend::reference)
    throw UsageError(fmt::format("--device: expected cpu or cuda:N, got \"{}\"", opt.device));
  const int threads = device.backend == Backend::cpu ? effective_threads(opt.threads) : 0;
  const std::string what =
      device.backend == Backend::cpu ? fmt::format("cpu at {} threads", threads) : device.name();

  std::optional<Roofline> roof;
  if (!opt.remeasure) roof = cached_roofline(device, threads);
  const bool measured = !roof;
  if (measured) {
    fmt::print("Measuring the roofline of {} (STREAM-like triad, L2 reads, FMA chains) ...\n",
               what);
    std::fflush(stdout);
    roof = measure_and_cache_roofline(device, threads);
  }
  fmt::print("Roofline of {}{}\n", what, measured ? " (measured now)" : " (cached)");
  fmt::print("  machine            {}\n", roof->machine);
  if (device.backend == Backend::cpu) fmt::print("  threads            {}\n", roof->threads);
  fmt::print("  bandwidth          {:10.1f} GB/s\n", roof->bandwidth_gbs);
  if (roof->cache_bandwidth_gbs > 0)
    fmt::print("  L2 bandwidth       {:10.1f} GB/s (reads)\n", roof->cache_bandwidth_gbs);
  fmt::print("  FMA peak fp32      {:10.1f} GFlops/s\n", roof->peak_gflops_fp32);
  fmt::print("  FMA peak fp64      {:10.1f} GFlops/s\n", roof->peak_gflops_fp64);
  fmt::print("  ridge point        {:10.2f} / {:.2f} flop/byte (fp32 / fp64)\n",
             roof->bandwidth_gbs > 0 ? roof->peak_gflops_fp32 / roof->bandwidth_gbs : 0.0,
             roof->bandwidth_gbs > 0 ? roof->peak_gflops_fp64 / roof->bandwidth_gbs : 0.0);
  fmt::print("  cache              {}\n", roofline_cache_path());
  warn_if_busy(*roof, std::cout);
  return 0;
}

}  // namespace

Command add_roofline_command(CLI::App& root) {
  auto opt = std::make_shared<RooflineOptions>();
  CLI::App* sub = root.add_subcommand(
      "roofline",
      "Show this machine's ceilings (memory bandwidth, FMA peak fp32/fp64), measuring "
      "them if they are not cached yet");
  sub->add_option("--threads", opt->threads, "OpenMP threads (cpu); 0: all")->type_name("N");
  sub->add_option("--device", opt->device, "cpu or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_flag("--remeasure", opt->remeasure,
                "Measure again even if cached, and update the cache");
  sub->footer(
      "The cache is $SCIPROXY_CACHE_DIR/roofline.json (default ~/.cache/sciproxy), one entry "
      "per CPU model and thread count, or per GPU.");
  return {sub, [opt] { return run_roofline(*opt); }};
}

}  // namespace sciproxy::app
