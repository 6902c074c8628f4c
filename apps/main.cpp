// sciproxy command-line tool: parses the command line and turns every error into one line.
// SIGINT and SIGTERM stop a run between steps (core/cancel.hpp): exit status 130 or 143.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <vector>

#include "cli_common.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/version.hpp"

namespace {

// Exit statuses: 0 success, 1 run-time failure (including a failed verification), 2 bad usage.
constexpr int kRuntimeFailure = 1;
constexpr int kUsage = 2;

// Under mpirun every rank runs the command and fails alike (the library's errors on a
// communicator are every rank's); rank 0 alone says so.
bool quiet_rank = false;

int fail(int status, const std::string& message) {
  if (quiet_rank) return status;
  // One line, whatever the message: a multi-line what() would read like a stack trace.
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fflush(stdout);
  fmt::print(stderr, "sciproxy: error: {}\n", line);
  return status;
}

// The signal that asked the run to stop (0: none). The handler only stores and asks for the
// stop, both async-signal-safe; the library notices at its next step and throws Cancelled. A
// second signal while the first is pending ends the process at once, the default way.
volatile std::sig_atomic_t received_signal = 0;

extern "C" void on_stop_signal(int signal) {
  if (received_signal != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  received_signal = signal;
  sciproxy::request_cancellation();
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a write in progress (an output file) goes on
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The shells' convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
int interrupted(const std::string& what) {
  const int signal = received_signal;
  if (quiet_rank) return signal == 0 ? kRuntimeFailure : 128 + signal;
  std::fflush(stdout);
  if (signal == 0) {  // a cancellation no signal asked for: an ordinary failure
    fmt::print(stderr, "sciproxy: error: {}\n", what);
    return kRuntimeFailure;
  }
  // On a terminal the progress line may be half drawn: start a new line.
  fmt::print(stderr, "{}sciproxy: interrupted by {}; {}\n", isatty(2) ? "\n" : "",
             signal == SIGINT    ? "SIGINT"
             : signal == SIGTERM ? "SIGTERM"
                                 : "a signal",
             what);
  return 128 + signal;
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
  // Under an MPI launcher (mpirun -n N sciproxy ...) every rank runs the command on the world's
  // ranks; rank 0 alone prints.
  std::optional<MpiSession> mpi;
  try {
    mpi.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    return fail(kRuntimeFailure, e.what());
  }
  app::set_ranks(mpi->world());
  if (mpi->world().rank() != 0) {
    quiet_rank = true;
    if (!std::freopen("/dev/null", "w", stdout)) return kRuntimeFailure;
  }
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
    commands.push_back(app::add_spex_command(root));
    commands.push_back(app::add_diffusion_command(root));
    commands.push_back(app::add_simulate_command(root));
    commands.push_back(app::add_bench_command(root));
    commands.push_back(app::add_demo_command(root));
    commands.push_back(app::add_run_command(root));
    commands.push_back(app::add_verify_command(root));
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

  install_stop_handlers();
  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run();
    return fail(kUsage, "no command given (see sciproxy --help)");
  } catch (const Cancelled& e) {
    return interrupted(e.what());
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
