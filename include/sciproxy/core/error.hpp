// Errors: one hierarchy for the whole library.
// The C ABI turns each class into an ErrorCode, Python into ValueError / TypeError / RuntimeError,
// the CLI into one line on stderr and a non-zero exit status.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace sciproxy {

// Values are part of the C ABI (sciproxy.h repeats them); never renumber.
enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,    // a value, shape or range is wrong       -> ValueError
  type_error = 2,          // a dtype or kind is wrong                -> TypeError
  not_compiled = 3,        // the backend was not built               -> RuntimeError
  device_unavailable = 4,  // the backend was built, the hardware is absent -> RuntimeError
  io_error = 5,            // a file could not be read or written     -> RuntimeError
  runtime_error = 6,       // anything else that went wrong at run time -> RuntimeError
  cancelled = 7,           // the caller asked the run to stop          -> KeyboardInterrupt
  out_of_memory = 8,       // the call needs more memory than is available -> MemoryError
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& m) : Error(ErrorCode::invalid_argument, m) {}
};
class TypeError : public Error {
 public:
  explicit TypeError(const std::string& m) : Error(ErrorCode::type_error, m) {}
};
class NotCompiled : public Error {
 public:
  explicit NotCompiled(const std::string& m) : Error(ErrorCode::not_compiled, m) {}
};
class DeviceUnavailable : public Error {
 public:
  explicit DeviceUnavailable(const std::string& m) : Error(ErrorCode::device_unavailable, m) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& m) : Error(ErrorCode::io_error, m) {}
};
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& m) : Error(ErrorCode::runtime_error, m) {}
};
// The run stopped between steps because its cancellation was requested (core/cancel.hpp);
// nothing the caller owns was left half-written.
class Cancelled : public Error {
 public:
  explicit Cancelled(const std::string& m) : Error(ErrorCode::cancelled, m) {}
};
// Refused before allocating: the call needs more memory than the process may use
// (core/resources.hpp), or an allocation failed.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& m) : Error(ErrorCode::out_of_memory, m) {}
};

// The one way to report bad input: names the argument, what was expected and what came.
[[noreturn]] void throw_invalid_argument(std::string_view argument, std::string_view expected,
                                         std::string_view got);
[[noreturn]] void throw_type_error(std::string_view argument, std::string_view expected,
                                   std::string_view got);

inline void require(bool condition, std::string_view argument, std::string_view expected,
                    std::string_view got) {
  if (!condition) throw_invalid_argument(argument, expected, got);
}

}  // namespace sciproxy
