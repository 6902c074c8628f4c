// wave: the gradient's storage (gradient_storage.hpp): temporary files that leave nothing behind,
// and the instances of GradientStore.
#include "gradient_storage.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sciproxy/core/error.hpp"

namespace sciproxy::wave::detail {

std::filesystem::path storage_directory(const std::string& directory, const char* argument) {
  std::filesystem::path dir = directory;
  if (directory.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  const char* what =
      directory.empty()
          ? "the system's temporary directory ($TMPDIR, else /tmp) to be an existing, "
            "writable directory for storage_mode 'disk' (or name one)"
          : "an existing, writable directory for storage_mode 'disk'";
  std::error_code ec;
  require(std::filesystem::is_directory(dir, ec), argument, what,
          fmt::format("'{}' (not a directory)", dir.string()));
  require(::access(dir.c_str(), W_OK | X_OK) == 0, argument, what,
          fmt::format("'{}' ({})", dir.string(), std::strerror(errno)));
  return dir;
}

TempFile::TempFile(const std::filesystem::path& dir, std::int64_t shot) : dir_(dir) {
  int error = 0;
#if defined(O_TMPFILE)
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  error = errno;
#endif
  if (fd_ < 0) {
    // No O_TMPFILE here (or on this file system): a unique name, unlinked as soon as it exists,
    // so that only this descriptor holds the file.
    std::string name = (dir / fmt::format("sciproxy-scalar-shot{}-XXXXXX", shot)).string();
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) {
      ::unlink(name.c_str());
    } else if (error == 0 || error == EOPNOTSUPP || error == EISDIR || error == EINVAL) {
      error = errno;  // O_TMPFILE was not the problem: report mkostemp's reason
    }
  }
  if (fd_ < 0)
    throw IoError(fmt::format("storage_path: cannot create the gradient storage file in '{}': {}",
                              dir.string(), std::strerror(error)));
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TempFile::write(std::int64_t offset, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError(
          fmt::format("storage_path: cannot write {} bytes to the gradient storage in "
                      "'{}': {}",
                      bytes, dir_.string(), n < 0 ? std::strerror(errno) : "no space"));
    p += n;
    offset += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void TempFile::read(std::int64_t offset, void* data, std::size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError(
          fmt::format("storage_path: cannot read {} bytes back from the gradient "
                      "storage in '{}': {}",
                      bytes, dir_.string(), n < 0 ? std::strerror(errno) : "end of file"));
    p += n;
    offset += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

template class GradientStore<float>;
template class GradientStore<double>;

}  // namespace sciproxy::wave::detail
