// Recording and RecordedCall: the report of every call made while a Recording is alive.
#include "sciproxy/core/recording.hpp"

#include <exception>
#include <sstream>

#include "core/json.hpp"
#include "core/recorded_call.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy {

namespace {
thread_local Recording* active_recording = nullptr;
}  // namespace

Recording::Recording(RecordingOptions options) : options_(options), outer_(active_recording) {
  active_recording = this;
}

Recording::~Recording() {
  // Recordings nest: the one opened last on this thread is closed first.
  if (active_recording == this) active_recording = outer_;
}

Recording* Recording::active() {
  return active_recording;
}

bool Recording::passed() const {
  for (const auto& r : reports_)
    if (!r.passed()) return false;
  return true;
}

std::string Recording::text() const {
  std::ostringstream out;
  for (const auto& r : reports_) {
    r.print(out);
    out << "\n";
  }
  return out.str();
}

std::string Recording::json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : reports_) j.push_back(to_json(r));
  return j.dump(2);
}

RecordedCall::Suspend::Suspend() : saved_(active_recording) {
  active_recording = nullptr;
}
RecordedCall::Suspend::~Suspend() {
  active_recording = saved_;
}

RecordedCall::RecordedCall(std::string kernel, const Device& device, Timers* caller_timers)
    : recording_(active_recording), timers_(caller_timers) {
  if (!recording_) return;
  report_.kernel = std::move(kernel);
  report_.device = device;
  if (!timers_) timers_ = &report_.timers;
  uncaught_ = std::uncaught_exceptions();
  start_ = std::chrono::steady_clock::now();
}

RecordedCall::~RecordedCall() {
  if (!recording_ || std::uncaught_exceptions() > uncaught_) return;
  report_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_ - excluded_).count();
  // The roofline only when it is cached: a recording never starts a measurement by itself.
  try {
    const int threads = report_.device.backend == Backend::reference ? 1 : max_threads();
    report_.roofline = cached_roofline(report_.device, threads);
  } catch (...) {
    report_.roofline.reset();
  }
  report_.rates = derive_rates(report_.work, report_.seconds, report_.roofline);
  // A caller that passed its own Timers (the Python bindings do) still gets the table in the
  // report: the regions of this call are in it.
  if (timers_ && timers_ != &report_.timers) report_.timers = *timers_;
  recording_->reports().push_back(std::move(report_));
}

bool RecordedCall::verifying() const {
  return recording_ && recording_->options().verify && report_.device.backend != Backend::reference;
}

const Device& RecordedCall::reference_device() {
  static const Device reference{Backend::reference, 0, false};
  return reference;
}

}  // namespace sciproxy
