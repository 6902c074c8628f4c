// The options of the scalar-wave commands as settings of the library's cases.
#include "scalar_options.hpp"

#include <fmt/format.h>

namespace sciproxy::app {

void GradientStorageCli::add_to(CLI::App* sub) {
  sampling_option =
      sub->add_option(
             "--gradient-sampling", sampling,
             "With --gradient: store what the gradient needs every N inner time steps (the "
             "library's model_gradient_sampling_interval). Default: the step ratio, i.e. once per "
             "sample of --dt, as Deepwave does (Deepwave samples every step_ratio inner steps; "
             "its interval k is k x the step ratio here). 1: every inner step, the exact gradient "
             "of the discrete forward, at step ratio times the memory")
          ->type_name("N");
  storage_option =
      sub->add_option("--storage", storage,
                      "With --gradient: where the stored steps live: device (the memory of the "
                      "device that propagates; host memory for cpu), host (host memory, pinned "
                      "for cuda), disk (one file per shot in --storage-dir, removed afterwards), "
                      "none (nothing: no velocity gradient or image, the source gradient only)")
          ->type_name("MODE")
          ->capture_default_str();
  compression_option = sub->add_flag(
      "--storage-compression", compression,
      "With --gradient: compress the stored steps to 8 bits (one scale per block of 8 cells "
      "along each dimension): a quarter of the memory in float32, an eighth in float64; lossy");
  directory_option =
      sub->add_option("--storage-dir", directory,
                      "With --storage disk: an existing, writable directory for the storage "
                      "files (default: $TMPDIR, else /tmp; the files have no name and never "
                      "outlive the run)")
          ->type_name("DIR")
          ->check(output_directory());
}

void GradientStorageCli::apply(CaseSettings& settings, bool gradient) const {
  for (const CLI::Option* o :
       {sampling_option, storage_option, compression_option, directory_option})
    if (o && o->count() > 0 && !gradient)
      throw UsageError(
          fmt::format("{}: only used with --gradient (what the gradient stores)", o->get_name()));
  const bool sampling_given = sampling_option && sampling_option->count() > 0;
  if (sampling_given && sampling < 1)
    throw UsageError(
        fmt::format("--gradient-sampling: expected an interval of at least 1 inner "
                    "step (1: every inner step, the exact gradient), got {}",
                    sampling));
  if (directory_option && directory_option->count() > 0 && storage != "disk")
    throw UsageError(
        fmt::format("--storage-dir: only used with --storage disk, got --storage {}", storage));
  if (!gradient) return;
  settings.values["gradient_sampling"] = std::to_string(sampling_given ? sampling : 0);
  settings.values["storage"] = storage;
  settings.values["storage_compression"] = compression ? "1" : "0";
  if (storage == "disk") settings.values["storage_dir"] = directory;
}

std::string gradient_storage_label(const nlohmann::json& p, bool born) {
  const auto& g = p["gradient_storage"];
  const std::string storage = g["storage"].get<std::string>();
  if (storage == "none")
    return fmt::format("nothing (--storage none: no {} gradient; the source gradient only)",
                       born ? "scatter (image)" : "velocity");
  const auto ratio = p["step_ratio"].get<long long>();
  const auto interval = g["sampling_interval"].get<long long>();
  std::string why;
  if (g["sampling_default"].get<bool>())
    why =
        "the step ratio: once per sample of dt, as Deepwave; --gradient-sampling 1 for the "
        "exact gradient of the discrete forward";
  else if (interval == 1)
    why = "--gradient-sampling 1: the exact gradient of the discrete forward";
  else
    why = fmt::format("--gradient-sampling {}; the step ratio is {}", interval, ratio);
  std::string where = "in the device's memory";
  if (storage == "host") where = "in host memory";
  if (storage == "disk")
    where = fmt::format("on disk in '{}'", p.value("storage_dir", std::string()));
  return fmt::format("every {} inner step{} ({}), {}{}", interval, interval == 1 ? "" : "s", why,
                     where, g["compression"].get<bool>() ? ", compressed to 8 bits" : "");
}

const OptionNames& scalar_option_names() {
  static const OptionNames names{{{"ndim", "--ndim"},
                                  {"shape", "--shape"},
                                  {"shape0", "--shape"},
                                  {"shape1", "--shape"},
                                  {"shape2", "--shape"},
                                  {"spacing", "--spacing"},
                                  {"dt", "--dt"},
                                  {"nt", "--nt"},
                                  {"shots", "--shots"},
                                  {"receivers", "--receivers"},
                                  {"accuracy", "--accuracy"},
                                  {"pml_width", "--pml-width"},
                                  {"freq", "--freq"},
                                  {"source_depth", "--source-depth"},
                                  {"dtype", "--dtype"},
                                  {"scatter", "--scatter"},
                                  {"gradient_sampling", "--gradient-sampling"},
                                  {"storage", "--storage"},
                                  {"storage_compression", "--storage-compression"},
                                  {"storage_dir", "--storage-dir"},
                                  {"verify_nt", "--verify-nt"},
                                  {"verify_shots", "--verify-shots"},
                                  {"autotune", "--autotune"}},
                                 {"storage_compression", "autotune"}};
  return names;
}

}  // namespace sciproxy::app
