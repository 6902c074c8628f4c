// wave: the gradient's storage (gradient_storage.hpp): temporary files, and the instances of
// GradientStore.
#include "gradient_storage.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <random>

#include "sciproxy/core/error.hpp"

namespace sciproxy::wave::detail {

TempFile::TempFile(const std::filesystem::path& dir, std::int64_t shot) {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device rd;
  path_ = dir / fmt::format("sciproxy-scalar-{}-{}-{:08x}-shot{}.bin",
                            static_cast<long long>(::getpid()), counter++, rd(), shot);
  file_ = std::fopen(path_.c_str(), "w+bx");
  if (!file_)
    throw IoError(
        fmt::format("storage_path: cannot create the gradient storage file '{}'", path_.string()));
}
TempFile::~TempFile() {
  if (file_) std::fclose(file_);
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}
void TempFile::write(std::int64_t offset, const void* data, std::size_t bytes) {
  if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fwrite(data, 1, bytes, file_) != bytes)
    throw IoError(fmt::format("storage_path: cannot write {} bytes to '{}' (disk full?)", bytes,
                              path_.string()));
}
void TempFile::read(std::int64_t offset, void* data, std::size_t bytes) {
  if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fread(data, 1, bytes, file_) != bytes)
    throw IoError(
        fmt::format("storage_path: cannot read {} bytes back from '{}'", bytes, path_.string()));
}

template class GradientStore<float>;
template class GradientStore<double>;

}  // namespace sciproxy::wave::detail
