// Pieces every sciproxy subcommand shares: usage errors, option checks, rooflines, files,
// processes.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/metrics.hpp"

namespace sciproxy::app {

// Bad command-line input found after CLI11 has parsed: main() reports it and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A subcommand: its CLI11 node and what to run once the command line has been parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_info_command(CLI::App& root);
Command add_roofline_command(CLI::App& root);
Command add_parstack_command(CLI::App& root);
Command add_bench_command(CLI::App& root);  // `bench parstack`
Command add_demo_command(CLI::App& root);
Command add_run_command(CLI::App& root);  // any case of the registry

// --threads: 0 means "all" (the OpenMP default); negative is refused.
void check_threads(int threads);
int effective_threads(int threads);

void check_repetitions(int reps, std::string_view option = "--reps");

// Refuses an output path whose directory is missing or not writable, before any work is done,
// so a long run is not lost to a typo in --json.
void check_output_path(const std::string& path, std::string_view option);

// Parses the device and checks it can run here. A malformed name is a usage error (exit 2); a
// backend that was not built or is absent stays a sciproxy::Error (exit 1).
Device select_device_option(const std::string& spec, std::string_view option = "--device");

// Devices `auto` stands for when a command runs "everything available": cpu and every GPU.
std::vector<Device> available_compute_devices();

enum class RooflinePolicy { none, cached_only, measure_if_absent };

// The ceilings to compare a run on `device` against: the cpu's at `threads` (reference: at one
// thread, it runs serially), or the GPU's. Measures and caches them on first use when asked, and
// says so on `log`. Returns nothing (with a note on `log`) when they cannot be had.
std::optional<Roofline> roofline_for(const Device& device, int threads, RooflinePolicy policy,
                                     std::ostream& log);

// Physical memory of this machine in bytes (0 when unknown).
// Warns on `out` when the roofline was measured on a busy machine.
void warn_if_busy(const Roofline& r, std::ostream& out);


std::string format_bytes(double bytes);
std::string format_count(double n);  // 1.8e+08 style for large counts, plain for small ones

// Runs a program (looked up on PATH) with arguments, without a shell, and returns its exit status
// (127 when it could not be started). quiet: its stdout and stderr go to /dev/null.
int run_program(const std::vector<std::string>& argv, bool quiet = false);

// Folder holding the running executable ("" when unknown).
std::string executable_dir();

// The end of a kernel command: writes the run's JSON with the environment when asked, then
// fails the command (exit 1) when the verification against the reference failed.
template <class Run>
int finish_run(const Run& out, const std::string& json_path, int threads) {
  if (!json_path.empty()) {
    nlohmann::json j = out.to_json();
    j["environment"] = environment_record(threads);
    write_file_atomically(json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", json_path);
  }
  std::cout.flush();
  if (!out.passed())
    throw RuntimeError(fmt::format("verification against the reference failed: {}",
                                   out.report.verification->summary()));
  return 0;
}

}  // namespace sciproxy::app
