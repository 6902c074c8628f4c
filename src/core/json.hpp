// JSON forms of the core types, for the library and its own tools (CLI, tests): nlohmann/json
// stays out of the public headers, which offer JSON as text (KernelReport::json and friends).
#pragma once

#include <nlohmann/json.hpp>

#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/core/savepoint.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy {

nlohmann::json to_json(const BenchStats& stats);
nlohmann::json to_json(const Roofline& roofline);
Roofline roofline_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Rates& rates, const WorkModel& work);
nlohmann::json to_json(const Timers& timers);
nlohmann::json to_json(const RankTimers& timers);
nlohmann::json to_json(const Comparison& comparison);
nlohmann::json to_json(const Parameters& parameters);
Parameters parameters_from_json(const nlohmann::json& object);
nlohmann::json to_json(const KernelReport& report);
nlohmann::json environment_record(int threads = 0);
// Savepoints (core/savepoint.cpp): metadata as an object, a comparison as `sciproxy verify` writes
// it.
nlohmann::json to_json(const savepoint::Metadata& metadata);
nlohmann::json to_json(const savepoint::SavepointComparison& comparison);

}  // namespace sciproxy
