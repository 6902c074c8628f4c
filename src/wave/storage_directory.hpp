// wave: where the gradient's storage files go (storage_mode 'disk'); private to the library, its
// cases and the C ABI, so that each interface can name its own argument in the error.
#pragma once

#include <filesystem>
#include <string>

namespace sciproxy::wave::detail {

// `directory`, or when it is empty the system's temporary directory ($TMPDIR, else /tmp), never
// the current directory. It must be an existing, writable directory: InvalidArgument naming
// `argument` otherwise.
std::filesystem::path storage_directory(const std::string& directory, const char* argument);

}  // namespace sciproxy::wave::detail
