// Synthetic scalar-wave problems (a layered model, a Ricker source per shot, receivers along the
// surface, and for Born modelling a box-shaped velocity perturbation) and their timed, verified
// runs, shared by `sciproxy scalar`, `sciproxy bench scalar` and `sciproxy demo`.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_common.hpp"
#include "parstack_runner.hpp"  // Dtype, parse_dtype, dtype_name, dtype_size
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/wave.hpp"

namespace sciproxy::app {

// The problem: a model of `shape` cells (dimension 0 is depth) whose velocity increases with
// depth in `layers` layers from vmin to vmax; shot s has one source at depth `source_depth`,
// spread evenly along the last dimension; every shot records at `nreceivers` receivers spread
// evenly along the last dimension at depth `receiver_depth` (in 3-D on the middle line of
// dimension 1; in 1-D spread along the model).
// Born modelling (`born`): the scatter (the velocity perturbation) is `scatter` m/s in a box
// centred in the model, of about a tenth of the model per dimension (at least one cell:
// scatter_box()); the scattered field is recorded at the receivers, and the background field at
// the same receivers (bg receivers). With `gradient`, the adjoint: the migration image (the
// gradient with respect to the scatter) and the source gradient, of 0.5 ||Born data||^2 +
// 0.5 ||background data||^2.
struct ScalarSpec {
  int ndim = 2;
  std::vector<std::int64_t> shape = {251, 500};
  double spacing = 5;      // m
  double dt = 0.004;       // s
  std::int64_t nt = 500;
  std::int64_t nshots = 10;
  std::int64_t nreceivers = 250;
  int accuracy = 4;
  std::int64_t pml_width = 20;
  double freq = 25;        // Hz: the Ricker wavelet's peak and the PML frequency
  double vmin = 1500, vmax = 4000;
  int layers = 5;
  std::int64_t source_depth = 2, receiver_depth = 1;  // cells
  Dtype dtype = Dtype::float32;
  bool gradient = false;   // forward + adjoint (velocity and source gradient)
  bool born = false;       // Born modelling (scalar_born; with gradient: scalar_born_gradient)
  double scatter = 100;    // m/s, the perturbation inside the box (Born only)
  // What a gradient run stores of the forward pass (wave::ScalarOptions): every
  // `gradient_sampling` inner steps (the library's model_gradient_sampling_interval; 1, the
  // library's default: every inner step, the exact gradient of the discrete forward; 0: every
  // step_ratio inner steps, once per sample of dt, Deepwave's default), where, and compressed
  // or not. See store_interval().
  std::int64_t gradient_sampling = 1;
  wave::StorageMode storage = wave::StorageMode::device;
  bool storage_compression = false;
  std::string storage_directory = ".";  // for StorageMode::disk

  std::int64_t cells() const;
  double max_velocity() const;     // of the model as the library sees it (in dtype)
  std::int64_t step_ratio() const;  // inner steps per dt (wave::cfl_time_stepping)
  std::int64_t store_interval() const;  // gradient_sampling, with 0 resolved to step_ratio()
  std::string label() const;  // "2-D 251 x 500 cells (5 m), 10 shots x 250 receivers, nt 500 ..."
  std::string kernel() const;  // "scalar", "scalar_gradient", "scalar_born", "scalar_born_gradient"
  // The scatter box: first and one-past-last cell per dimension (first ndim entries used).
  std::array<std::int64_t, 3> box_begin() const;
  std::array<std::int64_t, 3> box_end() const;
  std::string scatter_label() const;  // "+100 m/s in cells [113, 138) x [225, 275)"
};

// --storage: "device", "host", "disk" or "none" (UsageError naming `option` otherwise).
wave::StorageMode parse_storage_mode(const std::string& name, std::string_view option = "--storage");
const char* storage_mode_name(wave::StorageMode mode);
// "every 8 inner steps (the step ratio, ...), in device memory": what a gradient run stores.
std::string gradient_storage_label(const ScalarSpec& spec);
// {"sampling_interval": inner steps (null for none), "sampling_default": whether it is the step
// ratio by default, "storage": "device", "compression": false}, for the JSON reports.
nlohmann::json gradient_storage_json(const ScalarSpec& spec);

// The gradient-storage options that `sciproxy scalar` and `sciproxy bench scalar` share:
// --gradient-sampling, --storage, --storage-compression, --storage-dir. Both commands default to
// Deepwave's sampling (once per sample of dt, every step_ratio inner steps).
struct GradientStorageCli {
  std::int64_t sampling = 0;  // 0: not given (the step ratio)
  std::string storage = "device";
  bool compression = false;
  std::string directory = ".";
  CLI::Option* sampling_option = nullptr;
  CLI::Option* storage_option = nullptr;
  CLI::Option* compression_option = nullptr;
  CLI::Option* directory_option = nullptr;

  void add_to(CLI::App* sub);
  // Checks the values (UsageError naming the option) and sets spec's gradient_sampling, storage,
  // storage_compression and storage_directory; `gradient`: whether --gradient was given (the
  // options are refused without it).
  void apply(ScalarSpec& spec, bool gradient) const;
  bool sampling_given() const { return sampling_option && sampling_option->count() > 0; }
};

// Refuses inconsistent or absurd specs (UsageError, naming the option). Locations are left to
// the library (a source outside the model is its InvalidArgument).
void check_scalar_spec(const ScalarSpec& spec, const std::vector<Device>& devices);

struct ScalarRunOptions {
  int threads = 0;  // 0: all
  int warmup = 1;
  int reps = 3;
  bool verify = false;
  // Verification window: the device and the reference (serial) rerun the first verify_nt samples
  // of the first verify_shots shots and are compared. 0: min(nt, 100) and min(nshots, 2).
  std::int64_t verify_nt = 0;
  std::int64_t verify_shots = 0;
  RooflinePolicy roofline = RooflinePolicy::measure_if_absent;
};

struct ScalarOutcome {
  KernelReport report;
  BenchStats stats;
  std::int64_t step_ratio = 1;
  double inner_dt = 0;
  double storage_bytes = 0;
  // Verification: the window compared, and the comparisons (receivers and final wavefield for a
  // forward run; velocity and source gradients for a gradient run; for Born, scattered and
  // background receivers and the final scattered wavefield, or the image and the source
  // gradient). report.verification holds the first failing one, else the first.
  std::int64_t verified_nt = 0, verified_shots = 0;
  std::vector<std::pair<std::string, Comparison>> checks;

  double points() const { return report.work.points; }
  double gpts(double seconds) const { return seconds > 0 ? points() / seconds * 1e-9 : 0.0; }
  bool passed() const { return !report.verification || report.verification->pass; }
  std::string verification_scope() const;  // "shots 0-1, samples 0-99 (800 inner steps)"
  nlohmann::json to_json() const;
};

// Receiver amplitudes and gradients: rel L2 1e-5 (float32), 1e-12 (float64). The final
// wavefield of a forward run (every cell after every step): 1e-4, 1e-11. Born (`born`): the
// scattered field is driven by the background field's Laplacian times a small perturbation, so
// the rounding of both fields reaches data of a smaller norm: data and gradients 1e-4, 1e-11.
// The final scattered wavefield: 1e-2, 1e-9. By the end of a run most of the scattered energy
// has left through the PML (in the demo's 60 x 120 problem its norm at nt 100 is 1/100 of that
// at nt 50), so what remains sits near the rounding floor: there the float32 reference itself
// differs from float64 by 8e-4, and cpu from the reference by 2e-3.
// With --storage-compression, the outputs computed from the stored steps (the velocity gradient,
// the image) in float32: 1e-2. The 8-bit quantization (steps of 1/127 of a block's largest value)
// turns the backends' float32 rounding differences into whole steps wherever a stored value lies
// near a rounding boundary: measured 4e-5 to 1.1e-3 between cpu and the reference on 30 x 40 to
// 100 x 150 problems, where the uncompressed gradients pass 1e-5. float64: scalar_tolerance (its
// rounding differences almost never cross a boundary; measured 5e-14).
Tolerance scalar_tolerance(Dtype dtype, bool born = false);
Tolerance scalar_compressed_tolerance(Dtype dtype, bool born = false);
Tolerance scalar_state_tolerance(Dtype dtype, bool born = false);

// The commands (cmd_scalar.cpp; cmd_bench.cpp adds `scalar` under the existing `bench`).
Command add_scalar_command(CLI::App& root);
Command add_bench_scalar_command(CLI::App& root);

// Builds the problem once and runs it on every device (run_benchmark, Timers); with
// options.verify, reruns a window on each device and on the reference and compares.
std::vector<ScalarOutcome> run_scalar(const ScalarSpec& spec, const std::vector<Device>& devices,
                                      const ScalarRunOptions& options, std::ostream& log);

}  // namespace sciproxy::app
