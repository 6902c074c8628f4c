// sciproxy command-line tool: parses the command line and turns every error into one line.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include "cli_common.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/version.hpp"

namespace {

// Exit statuses: 0 success, 1 run-time failure (including a failed verification), 2 bad usage.
constexpr int kRuntimeFailure = 1;
constexpr int kUsage = 2;

int fail(int status, const std::string& message) {
  // One line, whatever the message: a multi-line what() would read like a stack trace.
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fflush(stdout);
  fmt::print(stderr, "sciproxy: error: {}\n", line);
  return status;
}

// CLI11 reports an unknown command word as a missing subcommand; name it instead.
std::string unknown_command(CLI::App& app, int argc, char** argv, int position) {
  if (position >= argc || argv[position][0] == '-') return {};
  const auto subcommands = app.get_subcommands([](CLI::App*) { return true; });
  if (subcommands.empty()) return {};
  std::string names;
  for (CLI::App* sub : subcommands) {
    if (sub->get_name() == argv[position]) return unknown_command(*sub, argc, argv, position + 1);
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return fmt::format("unknown command \"{}\" (expected {})", argv[position], names);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sciproxy;
  CLI::App root{
      "sciproxy: GPU-ready scientific kernels, verified against a reference and measured "
      "against this machine's roofline."};
  root.name("sciproxy");
  root.set_version_flag("--version", std::string("sciproxy ") + build_info().version);
  root.require_subcommand(1);

  std::vector<app::Command> commands;
  try {
    commands.push_back(app::add_info_command(root));
    commands.push_back(app::add_roofline_command(root));
    commands.push_back(app::add_parstack_command(root));
    commands.push_back(app::add_scalar_command(root));
    commands.push_back(app::add_tti_command(root));
    commands.push_back(app::add_bench_command(root));
    commands.push_back(app::add_demo_command(root));
    commands.push_back(app::add_run_command(root));
  } catch (const std::exception& e) {
    return fail(kRuntimeFailure, e.what());
  }
  // After the subcommands exist: CLI11 copies a parent's footer into subcommands made later.
  root.footer("Run `sciproxy <command> --help` for the options of a command.");

  if (const std::string unknown = unknown_command(root, argc, argv, 1); !unknown.empty())
    return fail(kUsage, unknown);
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return root.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(kUsage, fmt::format("{} (see sciproxy --help)", e.what()));
  }

  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run();
    return fail(kUsage, "no command given (see sciproxy --help)");
  } catch (const app::UsageError& e) {
    return fail(kUsage, e.what());
  } catch (const InvalidArgument& e) {
    return fail(kUsage, e.what());
  } catch (const TypeError& e) {
    return fail(kUsage, e.what());
  } catch (const OutOfMemory& e) {  // refused up front: a problem too large for this machine
    return fail(kUsage, e.what());
  } catch (const Error& e) {
    return fail(kRuntimeFailure, e.what());
  } catch (const std::bad_alloc&) {
    return fail(kRuntimeFailure, "out of memory (try a smaller problem)");
  } catch (const std::exception& e) {
    return fail(kRuntimeFailure, e.what());
  }
}
