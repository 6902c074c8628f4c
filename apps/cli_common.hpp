// Pieces every sciproxy subcommand shares: usage errors, option checks, rooflines, files,
// processes.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
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
Command add_scalar_command(CLI::App& root);
Command add_tti_command(CLI::App& root);
Command add_spex_command(CLI::App& root);       // gpu_specter's spex over FITS files
Command add_simulate_command(CLI::App& root);   // a preprocessed image for spex
Command add_diffusion_command(CLI::App& root);  // ICON's diffusion granule, N steps
Command add_bench_command(
    CLI::App& root);  // `bench` (every case), `bench parstack`, `bench scalar`
Command add_demo_command(CLI::App& root);
Command add_run_command(CLI::App& root);     // any case of the registry
Command add_verify_command(CLI::App& root);  // two savepoints compared field by field

// The ranks the command runs on: MPI_COMM_WORLD under mpirun, else this process alone (set once
// by main). Every rank runs the command; rank 0 alone prints and writes files.
const Communicator& ranks();
void set_ranks(const Communicator& comm);

// The options of a command that set a case's settings: the library's errors name settings
// ("ntraces: expected at least 1, got 0"), the command's user knows options ("--ntraces").
// rewrite() names the options instead: the names before the first ": ", every "name=value" (a
// flag's value dropped), and every other setting name with an underscore wherever it stands.
struct OptionNames {
  std::vector<std::pair<std::string, std::string>> options;  // setting, option
  std::vector<std::string> flags;                            // settings set by a flag option
  std::string rewrite(const std::string& message) const;
};

// Runs a command's body; a bad value the library finds (InvalidArgument, TypeError) becomes a
// UsageError (exit 2) naming the option.
int with_option_names(const OptionNames& names, const std::function<int()>& body);

// "float32" and "float64", also as "f32" and "f64" (UsageError naming `option` otherwise).
std::string parse_dtype(const std::string& text, std::string_view option = "--dtype");

// The end of a kernel command run through the harness: writes the run's JSON record (with the
// environment) when asked, then fails the command (exit 1) when the verification failed.
int finish_case_run(const sciproxy::CaseResult& result, const std::string& json_path, int threads);

// The case's details of a result (Case::details) as one JSON object.
nlohmann::json details_of(const sciproxy::CaseResult& result);

// --threads: 0 means "all" (the OpenMP default); negative is refused.
void check_threads(int threads);
int effective_threads(int threads);

void check_repetitions(int reps, std::string_view option = "--reps");

// Refuses an output path whose directory is missing or not writable, before any work is done,
// so a long run is not lost to a typo in --json.
void check_output_path(const std::string& path, std::string_view option);

// What is wrong with `path` as a file to write ("" when nothing is): empty, a directory, a
// missing or unwritable parent directory. check_output_path and output_file() both use it.
std::string output_path_problem(const std::string& path);

// CLI11 checks for the options that name a file to write (--json, --plot) or a directory to
// write in (--storage-dir). They run while the command line is parsed, so a bad path given to
// the option, an empty one included, is a usage error that names the option before any work
// starts (an empty value is not "the option absent").
CLI::Validator output_file();
CLI::Validator output_directory();

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

}  // namespace sciproxy::app
