// Reports of library calls, for any caller (C++, C, Python, Fortran): while a Recording is alive
// on a thread, every sciproxy kernel call made on that thread appends its KernelReport (the
// backend that ran, the work model, time, rates, roofline fraction when the machine's ceilings
// are cached, the timer table) and, when asked, reruns itself on the reference backend and
// records the comparison with the family's tolerance.
#pragma once

#include <string>
#include <vector>

#include "sciproxy/core/report.hpp"

namespace sciproxy {

struct RecordingOptions {
  bool verify = false;  // rerun every call on the reference backend and compare its outputs
};

class Recording {
 public:
  explicit Recording(RecordingOptions options = {});
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  const RecordingOptions& options() const { return options_; }
  const std::vector<KernelReport>& reports() const { return reports_; }
  std::vector<KernelReport>& reports() { return reports_; }
  bool passed() const;       // every verified call passed
  std::string text() const;  // every report as `print` writes it
  std::string json() const;  // a JSON array of the reports

  // The innermost Recording alive on this thread, or null.
  static Recording* active();

 private:
  RecordingOptions options_;
  std::vector<KernelReport> reports_;
  Recording* outer_ = nullptr;
};

}  // namespace sciproxy
