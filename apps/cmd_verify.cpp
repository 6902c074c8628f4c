// `sciproxy verify A.nc B.nc`: compares two savepoints (core/savepoint.hpp) field by field, A the
// result and B the reference, under numpy.allclose's test |A - B| <= atol + rtol |B| with one
// tolerance for every field or a tolerance file per field (Serialbox's compare tool). Prints a
// table of the errors and where the worst is; exit status 0 when every field passes, 1 when one
// fails, 2 for bad input (a missing or non-NetCDF file, a malformed tolerance file).
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/savepoint.hpp"

namespace sciproxy::app {

namespace {

namespace sp = sciproxy::savepoint;

struct VerifyOptions {
  std::string path_a, path_b;
  double rtol = sp::FieldTolerance{}.rtol;
  double atol = sp::FieldTolerance{}.atol;
  std::string tolerance_file;
  std::string json_path;
};

void check_tolerance(double value, std::string_view option) {
  if (!std::isfinite(value) || value < 0)
    throw UsageError(
        fmt::format("{}: expected a finite number of 0 or more, got {}", option, value));
}

std::string error_text(double x) {
  return fmt::format("{:.3e}", x);
}

// The table: one row per field, the columns as wide as their widest entry.
void print_table(const sp::SavepointComparison& c) {
  const std::vector<std::string> header{"field",  "shape",    "max abs", "max rel",
                                        "rel L2", "worst at", "rtol",    "atol"};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> results;
  for (const auto& f : c.fields) {
    const bool compared = f.status == sp::FieldStatus::compared;
    const std::string none = "-";
    rows.push_back({f.name, sp::shape_text(f.dims, f.shape),
                    compared ? error_text(f.max_abs) : none,
                    compared ? error_text(f.max_rel) : none, compared ? error_text(f.rel_l2) : none,
                    compared && f.max_abs != 0 ? sp::shape_text(f.dims, f.worst_index) : none,
                    fmt::format("{:g}", f.tolerance.rtol), fmt::format("{:g}", f.tolerance.atol)});
    results.push_back(f.pass ? "PASS" : fmt::format("FAIL ({})", f.problem()));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t j = 0; j < header.size(); ++j) {
    width[j] = header[j].size();
    for (const auto& r : rows) width[j] = std::max(width[j], r[j].size());
  }
  auto print_row = [&](const std::vector<std::string>& cells, const std::string& result) {
    std::string line;
    for (std::size_t j = 0; j < cells.size(); ++j)
      line += fmt::format("{:<{}}  ", cells[j], width[j]);
    fmt::print("{}{}\n", line, result);
  };
  print_row(header, "result");
  for (std::size_t i = 0; i < rows.size(); ++i) print_row(rows[i], results[i]);
}

int run_verify(const VerifyOptions& opt, bool global_tolerance_given) {
  check_tolerance(opt.rtol, "--rtol");
  check_tolerance(opt.atol, "--atol");
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  sp::Tolerances tolerances;
  if (!opt.tolerance_file.empty()) {
    tolerances = sp::read_tolerances(opt.tolerance_file);
  } else {
    tolerances.global = {opt.rtol, opt.atol};
  }
  const sp::SavepointFile a(opt.path_a), b(opt.path_b);
  const sp::SavepointComparison c = sp::verify_savepoints(a, b, tolerances);

  auto label = [](const sp::SavepointFile& f) {
    return f.name().empty() ? f.path() : fmt::format("{} (savepoint {})", f.path(), f.name());
  };
  fmt::print("Comparing {}\n     with {}, the reference\n", label(a), label(b));
  if (tolerances.source.empty())
    fmt::print("Test: |A - B| <= atol + rtol |B| with rtol {:g}, atol {:g}{}\n",
               tolerances.global.rtol, tolerances.global.atol,
               global_tolerance_given ? "" : " (the defaults)");
  else
    fmt::print(
        "Test: |A - B| <= atol + rtol |B| with the tolerances of {} (others: rtol {:g}, "
        "atol {:g})\n",
        tolerances.source, tolerances.global.rtol, tolerances.global.atol);
  for (const auto& note : c.notes) fmt::print("Note: {}\n", note);
  fmt::print("\n");
  print_table(c);

  std::vector<std::string> failed;
  for (const auto& f : c.fields)
    if (!f.pass) failed.push_back(f.name);
  std::string names;
  for (const auto& n : failed) names += (names.empty() ? "" : ", ") + n;
  if (c.pass)
    fmt::print("\nPASS: {} field{} within tolerance\n", c.fields.size(),
               c.fields.size() == 1 ? "" : "s");
  else
    fmt::print("\nFAIL: {} of {} fields failed ({})\n", failed.size(), c.fields.size(), names);

  if (!opt.json_path.empty()) {
    nlohmann::json j = to_json(c);
    j["tolerances"] = {{"file", tolerances.source.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(tolerances.source)},
                       {"rtol", tolerances.global.rtol},
                       {"atol", tolerances.global.atol}};
    j["a"]["metadata"] = to_json(a.metadata());
    j["b"]["metadata"] = to_json(b.metadata());
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  std::cout.flush();
  if (!c.pass)
    throw RuntimeError(fmt::format("verification failed: {} of {} fields ({})", failed.size(),
                                   c.fields.size(), names));
  return 0;
}

}  // namespace

Command add_verify_command(CLI::App& root) {
  auto opt = std::make_shared<VerifyOptions>();
  CLI::App* sub = root.add_subcommand(
      "verify",
      "Compare two savepoints (NetCDF-4) field by field: A the result, B the reference, "
      "under |A - B| <= atol + rtol |B|");
  sub->add_option("A", opt->path_a, "The savepoint to check (NetCDF-4)")
      ->required()
      ->type_name("A.nc");
  sub->add_option("B", opt->path_b, "The reference savepoint (NetCDF-4)")
      ->required()
      ->type_name("B.nc");
  CLI::Option* rtol = sub->add_option("--rtol", opt->rtol, "Relative tolerance of every field")
                          ->capture_default_str();
  CLI::Option* atol = sub->add_option("--atol", opt->atol, "Absolute tolerance of every field")
                          ->capture_default_str();
  CLI::Option* file =
      sub->add_option("--tolerances", opt->tolerance_file,
                      "Tolerances per field: lines `FIELD RTOL ATOL`, `* RTOL ATOL` "
                      "for the fields not listed, '#' comments")
          ->type_name("FILE");
  file->excludes(rtol)->excludes(atol);
  sub->add_option("--json", opt->json_path, "Write the comparison to FILE (JSON)")
      ->type_name("FILE")
      ->check(output_file());
  sub->footer(
      "A field in one file only, with other dimensions or shape, or with a NaN or an infinity, "
      "fails. Exit status: 0 when every field passes, 1 when one fails, 2 for bad input. The "
      "format of the files: docs/savepoints.md.");
  return {sub, [opt, rtol, atol] { return run_verify(*opt, rtol->count() + atol->count() > 0); }};
}

}  // namespace sciproxy::app
