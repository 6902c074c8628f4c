// `sciproxy run CASE`: any case of the library's registry, through the library's harness, with
// settings given as --set name=value (the case's own names; `--list` shows the cases).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

namespace {

struct RunCaseOptions {
  std::string name;
  std::vector<std::string> settings;
  std::string device = "cpu";
  int reps = 5, warmup = 1, threads = 0;
  bool list = false, no_verify = false;
  std::string json_path;
};

int run_case_command(const RunCaseOptions& opt) {
  if (opt.list) {
    for (const auto& entry : case_registry())
      fmt::print("{:<24} {:<6} {}\n", entry.name, entry.family, entry.description);
    return 0;
  }
  if (opt.name.empty())
    throw UsageError("CASE: expected the name of a case (see `sciproxy run --list`)");
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  const CaseEntry& entry = find_case(opt.name);
  CaseSettings settings;
  for (const auto& s : opt.settings) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("--set: expected name=value, got \"{}\"", s));
    settings.values[s.substr(0, eq)] = s.substr(eq + 1);
  }
  const Device device = select_device_option(opt.device);
  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.warmup = opt.warmup;
  harness.threads = opt.threads;
  harness.verify = !opt.no_verify && device.backend != Backend::reference;
  harness.log = &std::cout;
  harness.progress = true;
  fmt::print("{}: {}\n", entry.name, entry.make(settings)->label());
  const auto results = run_case(entry, settings, {device}, harness);
  const CaseResult& result = results.front();
  result.report.print(std::cout);
  if (!opt.json_path.empty()) {
    nlohmann::json j = nlohmann::json::parse(case_result_json(result));
    j["case"] = entry.name;
    j["environment"] = environment_record(effective_threads(opt.threads));
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  std::cout.flush();
  if (!result.report.passed())
    throw RuntimeError(fmt::format("verification against the reference failed: {}",
                                   result.report.verification->summary()));
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opt = std::make_shared<RunCaseOptions>();
  CLI::App* sub = root.add_subcommand(
      "run",
      "Run one case of the library's registry through the harness: timed, verified against "
      "the reference, with its report");
  sub->add_option("case", opt->name, "The case (see --list)")->type_name("CASE");
  sub->add_flag("--list", opt->list, "List the cases and exit");
  sub->add_option("--set", opt->settings, "A setting of the case, name=value (repeatable)")
      ->type_name("NAME=VALUE");
  sub->add_option("--device", opt->device, "reference, cpu, cuda, cuda:N or auto")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--reps", opt->reps, "Timed repetitions")->type_name("R")->capture_default_str();
  sub->add_option("--warmup", opt->warmup, "Untimed calls first")
      ->type_name("W")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_flag("--no-verify", opt->no_verify, "Do not compare with the reference backend");
  sub->add_option("--json", opt->json_path, "Write the report to FILE")
      ->type_name("FILE")
      ->check(output_file());
  return {sub, [opt] { return run_case_command(*opt); }};
}

}  // namespace sciproxy::app
