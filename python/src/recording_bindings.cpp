// sciproxy._sciproxy, reports: a sciproxy::Recording (include/sciproxy/core/recording.hpp) that
// Python opens and closes explicitly (sciproxy.record() is its context manager). While it is
// open on a thread, every library call made on that thread appends its KernelReport, and with
// verify=True reruns on the reference backend and records the comparison. close() ends the
// recording and keeps what it recorded, so the reports stay readable after the `with` block.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <string>

#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/recording.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

class PyRecording {
 public:
  explicit PyRecording(bool verify)
      : recording_(std::make_unique<sciproxy::Recording>(sciproxy::RecordingOptions{verify})) {}

  // Ends the recording on this thread (calls made afterwards are not recorded); idempotent.
  void close() {
    if (!recording_) return;
    snapshot();
    recording_.reset();
  }
  bool open() const { return static_cast<bool>(recording_); }
  std::string json() {
    if (recording_) snapshot();
    return json_;
  }
  std::string text() {
    if (recording_) snapshot();
    return text_;
  }
  bool passed() {
    if (recording_) snapshot();
    return passed_;
  }
  std::size_t count() {
    if (recording_) snapshot();
    return count_;
  }

 private:
  void snapshot() {
    json_ = recording_->json();
    text_ = recording_->text();
    passed_ = recording_->passed();
    count_ = recording_->reports().size();
  }

  std::unique_ptr<sciproxy::Recording> recording_;
  std::string json_ = "[]";
  std::string text_;
  bool passed_ = true;
  std::size_t count_ = 0;
};

}  // namespace

void register_recording(nb::module_& m) {
  nb::class_<PyRecording>(m, "Recording",
                          "Reports of the library calls made on this thread while it is open "
                          "(use sciproxy.record(), not this class, directly).")
      .def(nb::init<bool>(), "verify"_a = false,
           "Opens a recording on this thread; verify: rerun every call on the reference backend.")
      .def("close", &PyRecording::close, "Ends the recording; what it recorded stays readable.")
      .def_prop_ro("open", &PyRecording::open, "Whether the recording is still open.")
      .def("json", &PyRecording::json, "The reports as a JSON array.")
      .def("text", &PyRecording::text, "The reports as the command line prints them.")
      .def("passed", &PyRecording::passed, "Whether every verified call passed.")
      .def("__len__", &PyRecording::count, "The number of calls recorded.");

  // The tolerances the library verifies with (each family's case.hpp), for callers that compare
  // results of their own: the Python tests use these instead of copies.
  m.def(
      "case_tolerance",
      [](const std::string& name, const std::map<std::string, std::string>& settings,
         const std::string& output) {
        const sciproxy::Tolerance t =
            sciproxy::case_tolerance(name, sciproxy::CaseSettings{settings}, output);
        return std::map<std::string, double>{{"rel_l2", t.rel_l2}, {"max_abs", t.max_abs}};
      },
      "case"_a, "settings"_a, "output"_a,
      "The tolerance (rel_l2, max_abs) of an output of a registered case for its settings.");
}
