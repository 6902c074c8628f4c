// Shared helpers of the sciproxy subcommands: option checks, rooflines, output paths, processes.
#include "cli_common.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <regex>
#include <sstream>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/core/roofline.hpp"

extern char** environ;

namespace sciproxy::app {

void check_threads(int threads) {
  try {
    resolve_threads(threads, "--threads");
  } catch (const InvalidArgument& e) {
    throw UsageError(e.what());
  }
}

int effective_threads(int threads) {
  return resolve_threads(threads, "--threads");
}

void check_repetitions(int reps, std::string_view option) {
  if (reps < 1) throw UsageError(fmt::format("{}: expected at least 1, got {}", option, reps));
}

std::string output_path_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "expected a file name, got an empty string";
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(target, ec))
    return fmt::format("expected a file name, got {}, which is a directory", path);
  if (!fs::is_directory(dir, ec))
    return fmt::format(
        "expected a file in an existing directory, got {} (the directory {} does "
        "not exist)",
        path, dir.string());
  if (access(dir.c_str(), W_OK) != 0)
    return fmt::format(
        "expected a file in a writable directory, got {} (the directory {} is "
        "not writable)",
        path, dir.string());
  if (fs::exists(target, ec) && access(target.c_str(), W_OK) != 0)
    return fmt::format("expected a writable file, got {} (it exists and is not writable)", path);
  return "";
}

void check_output_path(const std::string& path, std::string_view option) {
  if (const std::string problem = output_path_problem(path); !problem.empty())
    throw UsageError(fmt::format("{}: {}", option, problem));
}

CLI::Validator output_file() {
  // CLI11 reports a failed check as "<option>: <what the function returned>".
  return CLI::Validator([](std::string& path) { return output_path_problem(path); }, "",
                        "output_file");
}

CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (path.empty()) return "expected an existing, writable directory, got an empty string";
        if (!fs::is_directory(path, ec))
          return fmt::format("expected an existing, writable directory, got {} (it does not exist)",
                             path);
        if (access(path.c_str(), W_OK) != 0)
          return fmt::format(
              "expected an existing, writable directory, got {} (it is not writable)", path);
        return "";
      },
      "", "output_directory");
}

Device select_device_option(const std::string& spec, std::string_view option) {
  try {
    (void)parse_device(spec);
  } catch (const InvalidArgument&) {
    throw UsageError(
        fmt::format("{}: expected auto, reference, cpu, cuda or cuda:N, got \"{}\"", option, spec));
  }
  return select_device(spec);
}

std::vector<Device> available_compute_devices() {
  std::vector<Device> devices{Device{Backend::cpu, 0, false}};
  for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device{Backend::cuda, i, false});
  return devices;
}

std::optional<Roofline> roofline_for(const Device& device, int threads, RooflinePolicy policy,
                                     std::ostream& log) {
  if (policy == RooflinePolicy::none) return std::nullopt;
  // The reference backend is a serial loop: its ceiling is one core's.
  Device roof_device = device;
  int roof_threads = 0;
  if (device.backend == Backend::reference) {
    roof_device = Device{Backend::cpu, 0, false};
    roof_threads = 1;
  } else if (device.backend == Backend::cpu) {
    roof_threads = effective_threads(threads);
  }
  try {
    if (auto cached = cached_roofline(roof_device, roof_threads)) return cached;
    if (policy == RooflinePolicy::cached_only) return std::nullopt;
    const std::string what =
        roof_device.backend == Backend::cuda
            ? roof_device.name()
            : fmt::format("cpu at {} thread{}", roof_threads, roof_threads == 1 ? "" : "s");
    log << fmt::format("Measuring the roofline of {} (first use; cached in {}) ...\n", what,
                       roofline_cache_path());
    log.flush();
    Roofline r = measure_and_cache_roofline(roof_device, roof_threads);
    log << fmt::format(
        "  bandwidth {:.1f} GB/s, L2 {:.1f} GB/s, FMA peak {:.1f} GFlops/s fp32, {:.1f} GFlops/s "
        "fp64\n",
        r.bandwidth_gbs, r.cache_bandwidth_gbs, r.peak_gflops_fp32, r.peak_gflops_fp64);
    warn_if_busy(r, log);
    return r;
  } catch (const Cancelled&) {
    throw;  // a stop asked for, not a missing roofline
  } catch (const Error& e) {
    // A missing roofline only costs the "fraction of peak" column, never the run.
    log << fmt::format("note: no roofline for {}: {}\n", device.name(), e.what());
    return std::nullopt;
  }
}

void warn_if_busy(const Roofline& r, std::ostream& out) {
  // Ceilings measured on a busy machine are low and make every kernel look close to them.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (r.threads > 0 && cpus > 0 && r.load_average > 0.5 * static_cast<double>(cpus))
    out << fmt::format(
        "warning: the roofline was measured at load average {:.1f} on {} CPUs; "
        "measure again on a quiet machine: sciproxy roofline --remeasure\n",
        r.load_average, cpus);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string format_count(double n) {
  return std::abs(n) < 1e6 ? fmt::format("{:.0f}", n) : fmt::format("{:.2e}", n);
}

int run_program(const std::vector<std::string>& argv, bool quiet) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string OptionNames::rewrite(const std::string& message) const {
  auto option_of = [&](const std::string& name) -> const std::string* {
    for (const auto& [setting, option] : options)
      if (setting == name) return &option;
    return nullptr;
  };
  auto is_flag = [&](const std::string& name) {
    return std::find(flags.begin(), flags.end(), name) != flags.end();
  };
  std::string text = message;
  // The argument(s) the message is about: "a, b: expected ..."
  if (const auto colon = text.find(": "); colon != std::string::npos) {
    std::string head, item;
    std::stringstream in(text.substr(0, colon));
    bool all_known = true;
    while (std::getline(in, item, ',')) {
      const auto first = item.find_first_not_of(' ');
      const std::string name = first == std::string::npos ? "" : item.substr(first);
      const std::string* option = option_of(name);
      all_known = all_known && option != nullptr;
      if (option && head.find(*option) == std::string::npos)
        head += (head.empty() ? "" : ", ") + *option;
    }
    if (all_known && !head.empty()) text = head + text.substr(colon);
  }
  // "name=value" and names with an underscore in the rest (hints such as "use storage=disk").
  for (const auto& [setting, option] : options) {
    const std::regex assign("\\b" + setting + "=([^ ,;)]+)");
    text = std::regex_replace(text, assign, is_flag(setting) ? option : option + " $1");
    if (setting.find('_') != std::string::npos)
      text = std::regex_replace(text, std::regex("(^|[^-\\w])" + setting + "\\b"), "$1" + option);
  }
  return text;
}

int with_option_names(const OptionNames& names, const std::function<int()>& body) {
  try {
    return body();
  } catch (const InvalidArgument& e) {
    throw UsageError(names.rewrite(e.what()));
  } catch (const TypeError& e) {
    throw UsageError(names.rewrite(e.what()));
  } catch (const OutOfMemory& e) {  // the sizes the options asked for do not fit
    throw UsageError(names.rewrite(e.what()));
  }
}

std::string parse_dtype(const std::string& text, std::string_view option) {
  if (text == "float32" || text == "f32") return "float32";
  if (text == "float64" || text == "f64") return "float64";
  throw UsageError(fmt::format("{}: expected float32 or float64, got \"{}\"", option, text));
}

namespace {
Communicator& ranks_of_command() {
  static Communicator comm;
  return comm;
}
}  // namespace

const Communicator& ranks() {
  return ranks_of_command();
}
void set_ranks(const Communicator& comm) {
  ranks_of_command() = comm;
}

int finish_case_run(const CaseResult& result, const std::string& json_path, int threads) {
  if (!json_path.empty() && ranks().rank() == 0) {
    nlohmann::json j = nlohmann::json::parse(case_result_json(result));
    j["environment"] = environment_record(threads);
    write_file_atomically(json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", json_path);
  }
  std::cout.flush();
  if (!result.report.passed())
    throw RuntimeError(fmt::format("verification against the reference failed: {}",
                                   result.report.verification->summary()));
  return 0;
}

nlohmann::json details_of(const CaseResult& result) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : result.details.entries()) j[name] = nlohmann::json::parse(value);
  return j;
}

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace sciproxy::app
