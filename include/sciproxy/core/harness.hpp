// The one harness that measures and verifies any kernel: each family registers its cases (a
// default problem, how to run it on a device, its outputs, its tolerances per dtype and its work
// model: src/<family>/case.cpp), and run_case does the rest: warm-up, repetitions, rates,
// roofline fraction, verification against the reference backend, the timer table and the JSON
// record. The CLI (run, bench, demo), the tests and Python reach cases through this header.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy {

// Settings of a case: sizes and options by name ("ntraces", "nt", "dtype", ...). A case reads
// the names it knows and refuses those it does not.
struct CaseSettings {
  std::map<std::string, std::string> values;
  bool has(const std::string& name) const { return values.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  long long get_int(const std::string& name,
                    long long fallback) const;  // InvalidArgument if not an integer
  double get_real(const std::string& name,
                  double fallback) const;  // InvalidArgument if not a number
  // Refuses a name the case does not know (InvalidArgument listing the known ones): a misspelt
  // size would otherwise run the default problem silently.
  void check_known(const std::vector<std::string>& known) const;
};

// One named output of the last run, viewed in the case's own storage.
struct CaseOutput {
  std::string name;
  std::variant<std::span<const float>, std::span<const double>> values;
};

class Case {
 public:
  virtual ~Case() = default;
  virtual std::string kernel() const = 0;  // the report's name: "parstack", "scalar", ...
  virtual std::string label() const = 0;   // the problem in a few words: "30 traces x ..."
  virtual Parameters parameters() const = 0;
  virtual WorkModel work() const = 0;
  // One call on `device`. Returns the seconds its rates are derived from when the backend timed
  // itself (CUDA events), or 0 for the harness's wall clock around the call.
  virtual double run(const Device& device, Timers* timers) = 0;
  virtual std::vector<CaseOutput> outputs() const = 0;  // of the last run
  virtual Tolerance tolerance(const std::string& output) const = 0;

  // Verification compares the outputs() of two instances of the same settings: the reference
  // backend's after run_reference_window(), and each device's after its timed calls and
  // run_device_window(device). By default the window is the whole problem: the reference runs
  // it, and a device keeps the outputs of its last timed call. A case whose reference would take
  // long checks a part of the problem instead (some shift sets, the first samples of a few
  // shots, the first steps) and overrides both, so that outputs() returns that part for both.
  virtual void run_reference_window() { run(Device{Backend::reference, 0, false}, nullptr); }
  virtual void run_device_window(const Device& /*device*/) {}
  // Called when the warm-up calls are done: a case that keeps measurements of its own per call
  // (section times, a transfer split) starts them afresh, so they cover the timed calls only.
  virtual void start_timing() {}
  // What the timed calls measured beyond the report (the step ratio, the bytes a gradient
  // stored, section times, the verification window), as extra fields of the JSON record. Called
  // last, with the report complete (rates, roofline, checks).
  virtual Parameters details(const KernelReport& /*report*/) const { return {}; }
  // Runs the case's calls on the ranks of `comm` from now on (called once, before the first
  // run, on every rank). run() is then collective; work() stays the whole problem's, and
  // outputs() on rank 0 are the whole problem's, gathered, so they verify against the
  // reference of one process. The default refuses: the case runs on one rank only.
  virtual void distribute(const Communicator& comm);
};

using CaseFactory = std::function<std::unique_ptr<Case>(const CaseSettings&)>;

// The largest problem a case builds, whatever the machine: a case refuses (OutOfMemory) sizes
// beyond it, and beyond the memory available (core/resources.hpp), before allocating.
constexpr double kMaxCaseBytes = 64.0 * 1024 * 1024 * 1024;
void require_case_memory(double bytes, std::string_view arguments, std::string_view what,
                         std::string_view hint = {});

struct CaseEntry {
  std::string name;         // "parstack", "scalar", "tti_forward", ...
  std::string family;       // "stack", "wave", "tti"
  std::string description;  // one line for `sciproxy run --list`
  CaseFactory make;
  // The settings `sciproxy demo` runs (each a row of its summary); one empty entry: the default.
  std::vector<CaseSettings> demo_variants;
  // The settings `sciproxy bench` sweeps: the sizes and parameters users run, across their
  // range (empty: the demo variants).
  std::vector<CaseSettings> bench_sweep = {};
  // The tolerance of an output for the case's settings (dtype, compression, ...), without
  // making the case: what Case::tolerance returns, for callers that compare results of their
  // own (the Python tests, through sciproxy.tolerance).
  std::function<Tolerance(const CaseSettings&, const std::string& output)> tolerance = {};
};

// The tolerance of `output` of case `name` (find_case) for `settings`.
Tolerance case_tolerance(const std::string& name, const CaseSettings& settings,
                         const std::string& output);

// Every case of every family built into this library, in registration order.
const std::vector<CaseEntry>& case_registry();
const CaseEntry& find_case(const std::string& name);  // InvalidArgument naming the known cases

struct HarnessOptions {
  int warmup = 1;
  int repetitions = 5;
  bool verify = true;  // compare each output with the reference backend's run of the same case
  int threads = 0;     // OpenMP threads of the cpu backend; 0: all
  bool measure_roofline = true;  // measure (and cache) the ceilings when none are cached
  std::ostream* log = nullptr;   // progress notes ("verification: reference done in 1.2 s")
  // A one-line progress display on stderr ("parstack on cpu: repetition 2/5"), redrawn in
  // place; shown only when stderr is a terminal, so logs and pipes stay clean.
  bool progress = false;
  std::string progress_prefix;  // e.g. "[3/12] " when the caller runs many cases
  // The ranks the case runs on (collective): each timed call starts together on every rank and
  // lasts until the slowest ends. Rank 0 runs the reference and verifies; its report carries
  // the ranks' traffic and timers (KernelReport::ranks).
  Communicator comm;
};

struct CaseResult {
  KernelReport report;
  BenchStats stats;
  Parameters details;  // Case::details
};

// Runs the case on each device with the harness options; the reference backend's run of the
// same problem, when verification asks for it, is done once and shared by every device.
std::vector<CaseResult> run_case(const CaseEntry& entry, const CaseSettings& settings,
                                 const std::vector<Device>& devices, const HarnessOptions& options);

// The JSON record of a result (the report, the repetition statistics "bench", and the case's
// details as fields of their own), as text.
std::string case_result_json(const CaseResult& result);

}  // namespace sciproxy
