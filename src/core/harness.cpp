// The harness: the measuring loop every interface shares (core/harness.hpp).
#include "sciproxy/core/harness.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <thread>

#include "core/collective.hpp"
#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy {

std::string CaseSettings::get(const std::string& name, const std::string& fallback) const {
  const auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

long long CaseSettings::get_int(const std::string& name, long long fallback) const {
  const auto it = values.find(name);
  if (it == values.end()) return fallback;
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == it->second.size() && used > 0, name, "an integer",
          fmt::format("\"{}\"", it->second));
  return v;
}

double CaseSettings::get_real(const std::string& name, double fallback) const {
  const auto it = values.find(name);
  if (it == values.end()) return fallback;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == it->second.size() && used > 0 && std::isfinite(v), name, "a finite number",
          fmt::format("\"{}\"", it->second));
  return v;
}

void CaseSettings::check_known(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : values)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw_invalid_argument(name, fmt::format("a setting of this case: one of {}", list),
                             fmt::format("an unknown setting (= \"{}\")", value));
    }
}

const CaseEntry& find_case(const std::string& name) {
  std::string known;
  for (const auto& entry : case_registry()) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : ", ") + entry.name;
  }
  throw_invalid_argument("case", fmt::format("one of {}", known), fmt::format("\"{}\"", name));
}

void require_case_memory(double bytes, std::string_view arguments, std::string_view what,
                         std::string_view hint) {
  if (bytes > kMaxCaseBytes)
    throw OutOfMemory(fmt::format("{}: {} needs about {} of host memory; a case is limited to {}{}",
                                  arguments, what, format_bytes(bytes), format_bytes(kMaxCaseBytes),
                                  hint));
  require_memory(bytes, arguments, what, hint);
}

Tolerance case_tolerance(const std::string& name, const CaseSettings& settings,
                         const std::string& output) {
  const CaseEntry& entry = find_case(name);
  if (!entry.tolerance) throw RuntimeError(fmt::format("case {} states no tolerance", name));
  return entry.tolerance(settings, output);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A copy of the reference's outputs, kept while the other devices run.
struct Expected {
  std::string name;
  std::vector<double> f64;
  std::vector<float> f32;
  bool is_f32 = false;
};

std::vector<Expected> copy_outputs(const Case& c) {
  std::vector<Expected> out;
  for (const auto& o : c.outputs()) {
    Expected e;
    e.name = o.name;
    if (const auto* f = std::get_if<std::span<const float>>(&o.values)) {
      e.is_f32 = true;
      e.f32.assign(f->begin(), f->end());
    } else {
      const auto& d = std::get<std::span<const double>>(o.values);
      e.f64.assign(d.begin(), d.end());
    }
    out.push_back(std::move(e));
  }
  return out;
}

void verify_outputs(const Case& c, const std::vector<Expected>& expected, KernelReport& report) {
  const auto got = c.outputs();
  require(got.size() == expected.size(), "case outputs", fmt::format("{} outputs", expected.size()),
          fmt::format("{}", got.size()));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Expected& e = expected[i];
    const Tolerance tol = c.tolerance(e.name);
    Comparison cmp;
    if (e.is_f32)
      cmp = compare<float, float>(std::get<std::span<const float>>(got[i].values),
                                  std::span<const float>(e.f32), tol);
    else
      cmp = compare<double, double>(std::get<std::span<const double>>(got[i].values),
                                    std::span<const double>(e.f64), tol);
    cmp.output = e.name;
    report.add_check(std::move(cmp));
  }
}

std::optional<Roofline> roofline_of(const Device& device, int threads, const HarnessOptions& opt) {
  const int t = device.backend == Backend::reference ? 1 : threads;
  const Communicator& comm = opt.comm;
  if (comm.distributed()) {
    // Ranks share their node: its ceilings are those measured with all the node's threads, times
    // the nodes. Measured only by `sciproxy roofline` (never while the other ranks run).
    if (device.backend != Backend::cpu) return std::nullopt;
    const int node_threads =
        std::min(t * comm.ranks_on_node(), std::max(1, int(std::thread::hardware_concurrency())));
    auto node = cached_roofline(device, node_threads);
    if (!node) return std::nullopt;
    node->bandwidth_gbs *= comm.nodes();
    node->cache_bandwidth_gbs *= comm.nodes();
    node->peak_gflops_fp32 *= comm.nodes();
    node->peak_gflops_fp64 *= comm.nodes();
    return node;
  }
  try {
    if (auto cached = cached_roofline(device, t)) return cached;
    if (!opt.measure_roofline) return std::nullopt;
    if (opt.log)
      *opt.log << fmt::format("Measuring the roofline of {} ({} threads) once ...\n", device.name(),
                              t);
    return measure_and_cache_roofline(device, t);
  } catch (const Cancelled&) {
    throw;  // a stop asked for, not a missing roofline
  } catch (const Error& e) {
    if (opt.log) *opt.log << "Roofline unavailable: " << e.what() << "\n";
    return std::nullopt;
  }
}

// The ranks' traffic and timers over the timed calls, per call, on rank 0.
RankSummary rank_summary(const Communicator& comm, const Timers& timers,
                         const Communicator::Traffic& traffic, const HarnessOptions& options) {
  RankSummary summary;
  summary.ranks = comm.size();
  summary.nodes = comm.nodes();
  const double calls = options.repetitions;
  std::vector<double> mine{traffic.bytes_sent / calls, traffic.wait_seconds / calls};
  // Each rank's (bytes, wait) on every rank, gathered as integers of nanoseconds and bytes.
  const std::int64_t values[2] = {static_cast<std::int64_t>(mine[0]),
                                  static_cast<std::int64_t>(mine[1] * 1e9)};
  const auto all = collective::allgather(comm, values);
  summary.wait_min = 1e300;
  for (int r = 0; r < comm.size(); ++r) {
    const double bytes = double(all[2 * r]), wait = double(all[2 * r + 1]) * 1e-9;
    summary.bytes_exchanged += bytes;
    summary.wait_avg += wait / comm.size();
    summary.wait_min = std::min(summary.wait_min, wait);
    if (wait > summary.wait_max || r == 0) summary.wait_max = wait, summary.rank_of_max_wait = r;
  }
  summary.timers = RankTimers::gather(timers, comm, 0);
  return summary;
}

}  // namespace

namespace {
[[noreturn]] void refuse_ranks(const std::string& name, const Communicator& comm) {
  throw InvalidArgument(fmt::format(
      "ranks: case {} runs on one rank only in this version, and this run has {} ranks; run it "
      "without mpirun, or with -n 1",
      name, comm.size()));
}
}  // namespace

void Case::distribute(const Communicator& comm) {
  refuse_ranks(kernel(), comm);
}

std::vector<CaseResult> run_case(const CaseEntry& entry, const CaseSettings& settings,
                                 const std::vector<Device>& devices,
                                 const HarnessOptions& options) {
  require(options.repetitions >= 1, "repetitions", "at least 1",
          std::to_string(options.repetitions));
  require(options.warmup >= 0, "warmup", "0 or more", std::to_string(options.warmup));
  resolve_threads(options.threads, "threads");
  ThreadCount thread_count(options.threads);
  const int threads = max_threads();

  const Communicator& comm = options.comm;
  std::vector<Expected> expected;
  // On several ranks, rank 0 alone runs the reference; a failure there stops every rank.
  collective::on_every_rank(comm, [&] {
    if (options.verify && comm.rank() == 0) {
      auto reference = entry.make(settings);
      if (options.log) {
        *options.log << fmt::format(
            "{}: verification: the reference backend runs {} (or the part of it the case checks) "
            "...\n",
            entry.name, reference->label());
        options.log->flush();
      }
      const auto t0 = Clock::now();
      reference->run_reference_window();
      expected = copy_outputs(*reference);
      if (options.log)
        *options.log << fmt::format("{}: reference done in {:.2f} s\n", entry.name,
                                    seconds_since(t0));
    }
  });

  const bool show_progress = options.progress && isatty(STDERR_FILENO) != 0;
  std::vector<CaseResult> results;
  for (const Device& device : devices) {
    auto problem = entry.make(settings);
    if (comm.distributed()) problem->distribute(comm);
    CaseResult result;
    KernelReport& report = result.report;
    report.kernel = problem->kernel();
    report.device = device;
    report.parameters = problem->parameters();
    report.parameters.set("threads", device.backend == Backend::cuda
                                         ? 0
                                         : (device.backend == Backend::reference ? 1 : threads));
    report.roofline = roofline_of(device, threads, options);
    int call = 0;
    Communicator::Traffic traffic;  // of the timed calls, without the harness's own
    auto once = [&]() -> double {
      if (call++ == options.warmup) {  // the table shows timed calls only
        report.timers.clear();
        problem->start_timing();
        traffic = {};
      }
      if (show_progress)
        std::fprintf(stderr, "\r%s%s on %s: %s %d/%d\033[K", options.progress_prefix.c_str(),
                     entry.name.c_str(), device.name().c_str(),
                     call <= options.warmup ? "warm-up" : "repetition",
                     call <= options.warmup ? call : call - options.warmup,
                     call <= options.warmup ? options.warmup : options.repetitions);
      collective::barrier(comm);  // every rank starts together
      const Communicator::Traffic before = comm.traffic();
      const auto t0 = Clock::now();
      const double own = problem->run(device, &report.timers);
      const double seconds = own > 0 ? own : seconds_since(t0);
      const Communicator::Traffic after = comm.traffic();
      traffic.bytes_sent += after.bytes_sent - before.bytes_sent;
      traffic.bytes_received += after.bytes_received - before.bytes_received;
      traffic.messages += after.messages - before.messages;
      traffic.wait_seconds += after.wait_seconds - before.wait_seconds;
      return collective::allreduce_max(comm, seconds);  // the call lasts until the slowest rank
    };
    result.stats = run_benchmark(once, options.warmup, options.repetitions);
    if (comm.distributed()) report.ranks = rank_summary(comm, report.timers, traffic, options);
    if (show_progress) std::fprintf(stderr, "\r\033[K");
    report.work = problem->work();
    report.seconds = result.stats.median;
    report.rates = derive_rates(report.work, report.seconds, report.roofline);
    report.parameters.set("warmup", options.warmup);
    report.parameters.set("repetitions", options.repetitions);
    if (options.verify) {
      problem->run_device_window(device);
      if (comm.rank() == 0) verify_outputs(*problem, expected, report);
    }
    if (comm.rank() == 0) result.details = problem->details(report);
    results.push_back(std::move(result));
  }
  return results;
}

std::string case_result_json(const CaseResult& result) {
  nlohmann::json j = to_json(result.report);
  j["bench"] = to_json(result.stats);
  for (const auto& [name, value] : result.details.entries()) j[name] = nlohmann::json::parse(value);
  return j.dump(2);
}

}  // namespace sciproxy
