// The hook every public kernel entry point opens (see core/recording.hpp): it times the call,
// lends the call a Timers to fill when the caller passed none, and appends the call's report to
// the active Recording when it closes. With RecordingOptions::verify it lets the entry point
// rerun itself on the reference backend (on_reference) and record the comparison (compare).
// Without an active Recording it costs one thread-local read.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "sciproxy/core/recording.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy {

class RecordedCall {
 public:
  RecordedCall(std::string kernel, const Device& device, Timers* caller_timers);
  ~RecordedCall();  // appends the report (not when the call is unwinding from an exception)
  RecordedCall(const RecordedCall&) = delete;
  RecordedCall& operator=(const RecordedCall&) = delete;

  bool recording() const { return recording_ != nullptr; }
  // The timers to pass down: the caller's when given, else the report's while recording.
  Timers* timers() const { return timers_; }
  void set_work(const WorkModel& work) { report_.work = work; }
  Parameters& parameters() { return report_.parameters; }
  // True when the active Recording asks for verification and this call did not run on the
  // reference backend (and is not itself the reference rerun of another call).
  bool verifying() const;
  // Runs fn (the same call on the reference backend) with recording suspended; returns its value.
  // Its time is not the call's: the report's seconds leave it out.
  template <class Fn>
  decltype(auto) on_reference(Fn&& fn) const;
  // Compares one output with the reference's and adds it to the report's verification.
  template <class T>
  void compare(const std::string& output, std::span<const T> got, std::span<const T> expected,
               const Tolerance& tolerance);

  static const Device& reference_device();

 private:
  class Suspend {
   public:
    Suspend();
    ~Suspend();

   private:
    Recording* saved_;
  };

  Recording* recording_ = nullptr;
  Timers* timers_ = nullptr;
  KernelReport report_;
  std::chrono::steady_clock::time_point start_;
  mutable std::chrono::steady_clock::duration excluded_{};  // the reference reruns
  int uncaught_ = 0;
};

template <class Fn>
decltype(auto) RecordedCall::on_reference(Fn&& fn) const {
  Suspend suspended;
  const auto t0 = std::chrono::steady_clock::now();
  struct Excluded {  // adds the rerun's time even when fn returns a value or throws
    const RecordedCall* call;
    std::chrono::steady_clock::time_point t0;
    ~Excluded() { call->excluded_ += std::chrono::steady_clock::now() - t0; }
  } excluded{this, t0};
  return std::forward<Fn>(fn)();
}

template <class T>
void RecordedCall::compare(const std::string& output, std::span<const T> got,
                           std::span<const T> expected, const Tolerance& tolerance) {
  Comparison c = sciproxy::compare<T, T>(got, expected, tolerance);
  c.output = output;
  report_.add_check(std::move(c));
}

}  // namespace sciproxy
