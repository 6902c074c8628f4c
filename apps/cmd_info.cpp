// `sciproxy info`: what this build is and what hardware it can use.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/roofline.hpp"
#include "sciproxy/core/version.hpp"

namespace sciproxy::app {

namespace {

struct InfoOptions {
  std::string json_path;
};

int run_info(const InfoOptions& opt) {
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");

  const bool cuda = cuda_compiled();
  const auto gpus = cuda_devices();
  const int threads = max_threads();
  const Device cpu{Backend::cpu, 0, false};
  const auto roof = cached_roofline(cpu, threads);

  fmt::print("sciproxy {} (git {}, {} build)\n", build_info().version, build_info().git_commit,
             build_info().build_type);
  fmt::print("  compiler   {}\n", build_info().compiler);
  fmt::print("  flags      {}\n", build_info().flags);
  fmt::print("  backends   reference, cpu (OpenMP){}\n",
             cuda ? ", cuda" : "  [cuda: not compiled]");
  fmt::print("  cpu        {}, {} OpenMP threads\n", cpu_model(), threads);
  if (mpi_compiled())
    fmt::print("  mpi        {}; this run: {} rank{}\n", mpi_library_version(), ranks().size(),
               ranks().size() == 1 ? "" : "s");
  else
    fmt::print("  mpi        not compiled (install libopenmpi-dev and build again)\n");
  if (gpus.empty()) {
    fmt::print("  cuda       no device: {}\n", cuda_unavailable_reason());
  } else {
    for (const auto& g : gpus)
      fmt::print("  cuda:{:<5} {}, compute capability {}.{}, {} SMs, {:.1f} GiB\n", g.index, g.name,
                 g.compute_major, g.compute_minor, g.multiprocessors, g.memory_gib);
  }
  if (roof)
    fmt::print(
        "  roofline   cpu at {} threads: {:.1f} GB/s, {:.1f} / {:.1f} GFlops/s fp32 / fp64 ({})\n",
        threads, roof->bandwidth_gbs, roof->peak_gflops_fp32, roof->peak_gflops_fp64,
        roofline_cache_path());
  else
    fmt::print("  roofline   not measured yet at {} threads (run `sciproxy roofline`)\n", threads);

  if (!opt.json_path.empty()) {
    nlohmann::json gpu_list = nlohmann::json::array();
    for (const auto& g : gpus)
      gpu_list.push_back(
          {{"index", g.index},
           {"name", g.name},
           {"compute_capability", fmt::format("{}.{}", g.compute_major, g.compute_minor)},
           {"multiprocessors", g.multiprocessors},
           {"memory_gib", g.memory_gib}});
    nlohmann::json backends = {"reference", "cpu"};
    if (cuda) backends.push_back("cuda");
    nlohmann::json j = {{"kind", "sciproxy-info"},
                        {"version", build_info().version},
                        {"git_commit", build_info().git_commit},
                        {"build_type", build_info().build_type},
                        {"compiler", build_info().compiler},
                        {"flags", build_info().flags},
                        {"backends", backends},
                        {"cuda_compiled", cuda},
                        {"mpi_compiled", mpi_compiled()},
                        {"mpi_library", mpi_library_version()},
                        {"ranks", ranks().size()},
                        {"cpu_model", cpu_model()},
                        {"openmp_threads", threads},
                        {"cuda_devices", gpu_list},
                        {"roofline_cache", roofline_cache_path()},
                        {"roofline_cpu", roof ? to_json(*roof) : nlohmann::json(nullptr)},
                        {"environment", environment_record()}};
    if (gpus.empty()) j["cuda_unavailable_reason"] = cuda_unavailable_reason();
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& root) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* sub = root.add_subcommand(
      "info", "Version, compiler and flags, backends built, CPU and CUDA devices present, threads");
  sub->add_option("--json", opt->json_path, "Also write this information as JSON to FILE")
      ->type_name("FILE")
      ->check(output_file());
  return {sub, [opt] { return run_info(*opt); }};
}

}  // namespace sciproxy::app
