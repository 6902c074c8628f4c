// The one formatting of bad-input messages: "<argument>: expected <what>, got <what came>".
#include "sciproxy/core/error.hpp"

#include <fmt/format.h>

#include "core/dispatch.hpp"

namespace sciproxy {

void throw_invalid_argument(std::string_view argument, std::string_view expected,
                            std::string_view got) {
  throw InvalidArgument(fmt::format("{}: expected {}, got {}", argument, expected, got));
}

void throw_type_error(std::string_view argument, std::string_view expected, std::string_view got) {
  throw TypeError(fmt::format("{}: expected {}, got {}", argument, expected, got));
}

void throw_not_compiled(std::string_view kernel) {
  throw NotCompiled(
      fmt::format("{}: the CUDA backend was not compiled into this build of sciproxy "
                  "(configure with the cuda preset)",
                  kernel));
}

}  // namespace sciproxy
