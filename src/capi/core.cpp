// C ABI of what every family shares (include/sciproxy/c/core.h): the last error, the build and
// the devices, and recording the reports of calls (sciproxy::Recording, one per thread from C).
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/recording.hpp"
#include "sciproxy/core/version.hpp"
#include "sciproxy/sciproxy.h"

namespace {

using sciproxy::capi::guarded;

thread_local std::string last_error;

// The recording a C caller opened on this thread, and what the last one it closed reported:
// C has no scope to end a Recording, so begin and end bracket it, and the reports stay readable
// after end (a caller reads them once the calls are done).
struct ThreadRecording {
  std::unique_ptr<sciproxy::Recording> open;
  std::string json = "[]", text;
  std::int64_t count = 0;
  bool passed = true;
};
thread_local ThreadRecording recording;

// The cancellation a C caller installed on this thread (sciproxy_set_cancellation): a scope
// that stays open until replaced, since C has no scope to bracket the calls with.
thread_local std::unique_ptr<sciproxy::CancelScope> cancellation;

// snprintf's protocol: the whole length back, at most size - 1 characters and a NUL written.
std::size_t give_text(const std::string& text, char* buffer, std::size_t size) {
  if (buffer && size > 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

void refuse(const std::string& message) {
  throw sciproxy::RuntimeError(message);
}

}  // namespace

void sciproxy::capi::set_last_error(const std::string& message) {
  last_error = message;
}

sciproxy_status sciproxy::capi::agree_status(std::int64_t comm, sciproxy_status local,
                                             std::string message) {
  if (comm == kNoCommunicator) {  // this process alone: its status and message stay
    set_last_error(local == SCIPROXY_OK ? "" : message);
    return local;
  }
  return guarded([&] {
    const auto c = Communicator::from_handle(comm, "comm");
    std::exception_ptr mine;
    if (local != SCIPROXY_OK)
      mine = std::make_exception_ptr(Error(static_cast<ErrorCode>(local), message));
    collective::agree(c, mine);
  });
}

extern "C" {

const char* sciproxy_last_error(void) {
  return last_error.c_str();
}

const char* sciproxy_version(void) {
  return sciproxy::build_info().version.c_str();
}

int sciproxy_mpi_compiled(void) {
  return sciproxy::mpi_compiled() ? 1 : 0;
}

sciproxy_status sciproxy_agree_status(int64_t comm, sciproxy_status local) {
  return sciproxy::capi::agree_status(comm, local, sciproxy_last_error());
}

int sciproxy_cuda_compiled(void) {
  try {
    return sciproxy::cuda_compiled() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int sciproxy_cuda_device_count(void) {
  try {
    return sciproxy::cuda_device_count();
  } catch (...) {
    return 0;
  }
}

int sciproxy_max_threads(void) {
  try {
    return sciproxy::max_threads();
  } catch (...) {
    return 1;
  }
}

sciproxy_status sciproxy_select_device(const char* device, char* name, size_t size) {
  return guarded([&] {
    if (size > 0) sciproxy::capi::require_pointer(name, "name");
    give_text(sciproxy::capi::device_of(device).name(), name, size);
  });
}

sciproxy_status sciproxy_recording_begin(int verify) {
  return guarded([&] {
    if (recording.open)
      refuse(
          "sciproxy_recording_begin: a recording is already open on this thread (one per thread: "
          "call sciproxy_recording_end first)");
    // A C++ Recording opened by the caller on this thread would be closed out of order.
    if (sciproxy::Recording::active())
      refuse("sciproxy_recording_begin: a C++ sciproxy::Recording is alive on this thread");
    recording = ThreadRecording{};
    recording.open = std::make_unique<sciproxy::Recording>(sciproxy::RecordingOptions{verify != 0});
  });
}

sciproxy_status sciproxy_recording_end(void) {
  return guarded([&] {
    if (!recording.open)
      refuse(
          "sciproxy_recording_end: no recording is open on this thread (call "
          "sciproxy_recording_begin first)");
    recording.json = recording.open->json();
    recording.text = recording.open->text();
    recording.count = static_cast<std::int64_t>(recording.open->reports().size());
    recording.passed = recording.open->passed();
    recording.open.reset();
  });
}

size_t sciproxy_recording_json(char* buffer, size_t size) {
  try {
    return give_text(recording.open ? recording.open->json() : recording.json, buffer, size);
  } catch (...) {
    return give_text("[]", buffer, size);
  }
}

size_t sciproxy_recording_text(char* buffer, size_t size) {
  try {
    return give_text(recording.open ? recording.open->text() : recording.text, buffer, size);
  } catch (...) {
    return give_text("", buffer, size);
  }
}

int64_t sciproxy_recording_count(void) {
  return recording.open ? static_cast<int64_t>(recording.open->reports().size()) : recording.count;
}

int sciproxy_recording_passed(void) {
  try {
    return (recording.open ? recording.open->passed() : recording.passed) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

sciproxy_status sciproxy_set_cancellation(const volatile int* flag, int (*callback)(void*),
                                          void* user_data) {
  return guarded([&] {
    cancellation.reset();
    if (flag == nullptr && callback == nullptr) return;
    sciproxy::CancelScope::Callback poll;
    if (callback != nullptr) poll = [callback, user_data] { return callback(user_data) != 0; };
    cancellation = std::make_unique<sciproxy::CancelScope>(flag, std::move(poll));
  });
}

void sciproxy_request_cancellation(void) {
  sciproxy::request_cancellation();
}

void sciproxy_clear_cancellation_request(void) {
  sciproxy::clear_cancellation_request();
}

int sciproxy_cancellation_requested(void) {
  return sciproxy::cancellation_requested() ? 1 : 0;
}

}  // extern "C"
