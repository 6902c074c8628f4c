// The options that `sciproxy scalar` and `sciproxy bench scalar` share, as settings of the
// library's scalar-wave cases (src/wave/case.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

// --gradient-sampling, --storage, --storage-compression, --storage-dir. Both commands default to
// Deepwave's sampling (once per sample of dt, every step_ratio inner steps: the setting 0).
struct GradientStorageCli {
  std::int64_t sampling = 0;
  std::string storage = "device";
  bool compression = false;
  std::string directory;  // empty: $TMPDIR, else /tmp
  CLI::Option* sampling_option = nullptr;
  CLI::Option* storage_option = nullptr;
  CLI::Option* compression_option = nullptr;
  CLI::Option* directory_option = nullptr;

  void add_to(CLI::App* sub);
  // Refuses the options without --gradient (`gradient`), an interval below 1 and --storage-dir
  // without --storage disk (UsageError naming the option), and sets the case's settings; the
  // case checks the values themselves.
  void apply(CaseSettings& settings, bool gradient) const;
};

// What a gradient run stores, in words, from the case's parameters: "every 8 inner steps (the
// step ratio: ...), in the device's memory".
std::string gradient_storage_label(const nlohmann::json& parameters, bool born);

// The scalar cases' settings and the options of `sciproxy scalar` that set them.
const OptionNames& scalar_option_names();

}  // namespace sciproxy::app
