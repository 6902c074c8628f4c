// wave: what the backward pass of scalar_gradient reads of the forward one, 2 v dt^2 W at the
// stored steps: in memory as the kernels wrote it, or chunk by chunk compressed in memory or in
// one temporary file per shot (storage_mode, storage_compression, storage_path; the files have
// no name, so nothing is left behind). See docs/kernels/scalar-wave.md.
#pragma once

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "setup.hpp"
#include "storage_directory.hpp"

namespace sciproxy::wave::detail {

constexpr double kChunkBytes =
    64.0 * 1024 * 1024;             // stored steps per forward call (disk, compression)
constexpr std::int64_t kBlock = 8;  // compression block edge (cells)

// One file per shot in the storage directory, which nothing can leave behind: opened with
// O_TMPFILE (a file with no name) where the file system supports it, else created by mkstemp
// and unlinked at once. Either way the OS reclaims it however the process ends (even SIGKILL).
class TempFile {
 public:
  TempFile(const std::filesystem::path& dir, std::int64_t shot);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(std::int64_t offset, const void* data, std::size_t bytes);
  void read(std::int64_t offset, void* data, std::size_t bytes);

 private:
  std::filesystem::path dir_;  // for messages: the file itself has no name
  int fd_ = -1;
};

// Stores 2 v dt^2 W of the stored steps: in memory as the kernels wrote it (one chunk: the whole
// run), or chunk by chunk (kChunkBytes of stored steps per kernel call) compressed in memory or
// written to one file per shot. Compression: per stored step and shot, blocks of 8 cells along
// each dimension of the padded grid, one scale (max |x|) per block, x ~ round(127 x / scale).
template <class T>
class GradientStore {
 public:
  GradientStore(const Setup<T>& s, const ScalarOptions& opt, std::int64_t store_interval)
      : nshots_(s.nshots),
        points_(s.points),
        ndim_(s.ndim),
        n_(s.n),
        interval_(store_interval),
        compress_(opt.storage_compression),
        disk_(opt.storage == StorageMode::disk) {
    nstored_ = interval_ > 0 ? (s.nt_inner + interval_ - 1) / interval_ : 0;
    const std::int64_t record = nshots_ * points_;
    nblocks_ = 1;
    for (int d = 0; d < ndim_; ++d) nblocks_ *= (n_[d] + kBlock - 1) / kBlock;
    shot_record_bytes_ = compress_ ? nblocks_ * sizeof(T) + points_ : points_ * sizeof(T);
    if (nstored_ == 0) {
      chunk_stored_ = 1;
      chunk_steps_ = std::max<std::int64_t>(s.nt_inner, 1);
      return;
    }
    // What is stored in memory was checked against the available memory with the rest of the
    // call (make_setup, host_bytes), before anything was allocated.
    if (!compress_ && !disk_) {
      chunk_stored_ = nstored_;
      allocate(nstored_ * record);
    } else {
      // At most kChunkBytes of stored steps per kernel call, and at least 4 calls, so that the
      // chunked path runs (and is tested) on small problems too.
      chunk_stored_ = std::clamp<std::int64_t>(
          std::min(
              static_cast<std::int64_t>(kChunkBytes / (static_cast<double>(record) * sizeof(T))),
              (nstored_ + 3) / 4),
          1, nstored_);
      allocate(chunk_stored_ * record);
      if (!disk_)
        compressed_.resize(static_cast<std::size_t>(nstored_ * nshots_ * shot_record_bytes_));
    }
    chunk_steps_ = chunk_stored_ * interval_;
    if (disk_) {
      const std::filesystem::path dir = storage_directory(opt.storage_directory, "storage_path");
      for (std::int64_t shot = 0; shot < nshots_; ++shot)
        files_.push_back(std::make_unique<TempFile>(dir, shot));
    }
  }

  std::int64_t chunk_steps() const { return chunk_steps_; }  // inner steps per kernel call

  // Where the kernel writes the stored steps first .. first + count - 1.
  T* forward_buffer(std::int64_t first) {
    if (interval_ == 0) return nullptr;
    return whole() ? buffer_.get() + first * nshots_ * points_ : buffer_.get();
  }
  void save(std::int64_t first, std::int64_t count) {
    if (interval_ == 0 || whole()) return;
    std::vector<unsigned char> record(static_cast<std::size_t>(shot_record_bytes_));
    for (std::int64_t j = 0; j < count; ++j)
      for (std::int64_t shot = 0; shot < nshots_; ++shot) {
        const T* field = buffer_.get() + (j * nshots_ + shot) * points_;
        const std::int64_t index = first + j;
        if (disk_) {
          const void* bytes = field;
          if (compress_) {
            compress(field, record.data());
            bytes = record.data();
          }
          files_[shot]->write(index * shot_record_bytes_, bytes,
                              static_cast<std::size_t>(shot_record_bytes_));
        } else {
          compress(field, compressed_.data() + (index * nshots_ + shot) * shot_record_bytes_);
        }
        bytes_ += static_cast<double>(shot_record_bytes_);
      }
  }
  // The stored steps first .. first + count - 1, [count, nshots, points].
  const T* load(std::int64_t first, std::int64_t count) {
    if (interval_ == 0) return nullptr;
    if (whole()) return buffer_.get() + first * nshots_ * points_;
    std::vector<unsigned char> record(static_cast<std::size_t>(shot_record_bytes_));
    for (std::int64_t j = 0; j < count; ++j)
      for (std::int64_t shot = 0; shot < nshots_; ++shot) {
        T* field = buffer_.get() + (j * nshots_ + shot) * points_;
        const std::int64_t index = first + j;
        if (disk_) {
          if (compress_) {
            files_[shot]->read(index * shot_record_bytes_, record.data(), record.size());
            decompress(record.data(), field);
          } else {
            files_[shot]->read(index * shot_record_bytes_, field,
                               static_cast<std::size_t>(points_ * sizeof(T)));
          }
        } else {
          decompress(compressed_.data() + (index * nshots_ + shot) * shot_record_bytes_, field);
        }
      }
    return buffer_.get();
  }
  double bytes() const { return whole() ? static_cast<double>(buffer_size_ * sizeof(T)) : bytes_; }

 private:
  bool whole() const { return !compress_ && !disk_; }
  // Left uninitialised: every backend writes whole stored steps, and zeroing gigabytes here cost
  // a quarter of a 2-D gradient run on the cpu backend (a serial memset, then the page faults).
  // Large buffers come in 2 MiB pages where the kernel allows it (transparent huge pages on
  // request): 512 times fewer page faults when the forward first touches them.
  void allocate(std::int64_t n) {
    constexpr std::size_t kHugePage = std::size_t(2) << 20;
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T);
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (rounded >= 4 * kHugePage)
      madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
    buffer_.reset(static_cast<T*>(p));
    buffer_size_ = n;
  }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };

  // Calls f(block index, flat cell index) for every cell of the padded grid.
  template <class F>
  void for_each_block_cell(F&& f) const {
    Shape nb = {1, 1, 1};
    for (int d = 0; d < ndim_; ++d) nb[d] = (n_[d] + kBlock - 1) / kBlock;
    for (std::int64_t i0 = 0; i0 < n_[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < n_[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < n_[2]; ++i2) {
          const std::int64_t blk = ((i0 / kBlock) * nb[1] + i1 / kBlock) * nb[2] + i2 / kBlock;
          f(blk, (i0 * n_[1] + i1) * n_[2] + i2);
        }
  }
  void compress(const T* field, unsigned char* out) const {
    std::vector<T> scale(static_cast<std::size_t>(nblocks_), T(0));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      scale[blk] = std::max(scale[blk], std::abs(field[i]));
    });
    auto* q = reinterpret_cast<std::int8_t*>(out + nblocks_ * sizeof(T));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      q[i] =
          scale[blk] > 0 ? static_cast<std::int8_t>(std::lround(127.0 * field[i] / scale[blk])) : 0;
    });
    std::copy(reinterpret_cast<const unsigned char*>(scale.data()),
              reinterpret_cast<const unsigned char*>(scale.data() + nblocks_), out);
  }
  void decompress(const unsigned char* in, T* field) const {
    std::vector<T> scale(static_cast<std::size_t>(nblocks_));
    std::copy(in, in + nblocks_ * sizeof(T), reinterpret_cast<unsigned char*>(scale.data()));
    const auto* q = reinterpret_cast<const std::int8_t*>(in + nblocks_ * sizeof(T));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      field[i] = static_cast<T>(static_cast<double>(scale[blk]) * q[i] / 127.0);
    });
  }

  std::int64_t nshots_, points_;
  int ndim_;
  Shape n_;
  std::int64_t interval_;
  bool compress_, disk_;
  std::int64_t nstored_ = 0, nblocks_ = 1, shot_record_bytes_ = 0;
  std::int64_t chunk_stored_ = 1, chunk_steps_ = 1;
  std::unique_ptr<T[], Free> buffer_;
  std::int64_t buffer_size_ = 0;
  std::vector<unsigned char> compressed_;
  std::vector<std::unique_ptr<TempFile>> files_;
  double bytes_ = 0;
};
extern template class GradientStore<float>;
extern template class GradientStore<double>;

}  // namespace sciproxy::wave::detail
