// Large results (parstack's method-0 stacks: 72 MB to 1.3 GB at the sizes users run) in memory
// that is kept from one call to the next. A fresh block of that size is mapped and cleared by the
// kernel page by page as the stacking first writes it, and on this project's VMs that took 30-60%
// of a method-0 call (30 x 3000 x 6000 at +-5000, float64: 81-85 ms fresh against 45-48 ms in a
// reused block). A loop of calls that drops each result before (or right after) the next call
// gets the same memory back, as a detector's loop over time windows does.
//
// The array is numpy's view of the block (its base a capsule); when it goes, the block goes back
// to the pool, which keeps the two most recent blocks up to SCIPROXY_RESULT_CACHE_BYTES in all
// (default: a quarter of physical memory; 0 turns the pool off) and frees the others. release()
// frees the idle ones (sciproxy.stack.release_cached_results()). A block is reused for a request
// of 80-100% of its size (in whole 2 MiB pages). Smaller results come from numpy.empty as before:
// malloc's own heap recycles those.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "arrays.hpp"

namespace sciproxy::python {

namespace nb = nanobind;

class ResultPool {
 public:
  // Below this a result is not pooled (numpy's own threshold for huge-page advice).
  static constexpr std::size_t kMinBytes = std::size_t(4) << 20;
  static constexpr std::size_t kMaxIdleBlocks = 2;

  struct Block {
    void* data;
    std::size_t bytes;
  };

  // Never destroyed: arrays may outlive static destructors at interpreter exit.
  static ResultPool& instance() {
    static auto* pool = new ResultPool();
    return *pool;
  }

  // A block of at least `bytes`, in whole huge pages: an idle one of 1 to 5/4 times the size a new
  // one would have, else a new one.
  void* take(std::size_t bytes, std::size_t& block_bytes) {
    const std::size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::size_t best = idle_.size();
      for (std::size_t k = 0; k < idle_.size(); ++k)
        if (idle_[k].bytes >= size && idle_[k].bytes <= size + size / 4 &&
            (best == idle_.size() || idle_[k].bytes < idle_[best].bytes))
          best = k;
      if (best < idle_.size()) {
        const Block b = idle_[best];
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(best));
        idle_bytes_ -= b.bytes;
        block_bytes = b.bytes;
        return b.data;
      }
    }
    block_bytes = size;
    void* p = std::aligned_alloc(kHugePage, block_bytes);
    if (p == nullptr) throw std::bad_alloc();
    // As numpy.empty does for large arrays: fewer page faults on the first touch.
    madvise(p, block_bytes, MADV_HUGEPAGE);
    return p;
  }

  // The block of an array that is gone: kept if the pool has room, else freed (the oldest idle
  // blocks go first).
  void give_back(void* data, std::size_t bytes) noexcept {
    std::vector<void*> to_free;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (bytes > cap_) {
        to_free.push_back(data);
      } else {
        idle_.push_back({data, bytes});
        idle_bytes_ += bytes;
        while (idle_.size() > kMaxIdleBlocks || idle_bytes_ > cap_) {
          to_free.push_back(idle_.front().data);
          idle_bytes_ -= idle_.front().bytes;
          idle_.erase(idle_.begin());
        }
      }
    }
    for (void* p : to_free) std::free(p);
  }

  // Frees the idle blocks; returns their bytes.
  std::size_t release() {
    std::vector<Block> idle;
    std::size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle.swap(idle_);
      bytes = idle_bytes_;
      idle_bytes_ = 0;
    }
    for (const Block& b : idle) std::free(b.data);
    return bytes;
  }

  std::size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

 private:
  static constexpr std::size_t kHugePage = std::size_t(2) << 20;

  ResultPool() : cap_(default_cap()) {}

  static std::size_t default_cap() {
    if (const char* text = std::getenv("SCIPROXY_RESULT_CACHE_BYTES")) {
      char* end = nullptr;
      const unsigned long long value = std::strtoull(text, &end, 10);
      if (end != text && *end == '\0') return static_cast<std::size_t>(value);
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page / 4 : 0;
  }

  std::mutex mutex_;
  std::vector<Block> idle_;  // oldest first
  std::size_t idle_bytes_ = 0;
  const std::size_t cap_;
};

// An uninitialised C-contiguous numpy array of `shape` and dtype T: a pooled block when it is
// large, else numpy.empty's own array.
template <class T>
nb::object pooled_empty(const std::vector<std::int64_t>& shape) {
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  std::size_t count = 1;
  for (std::size_t d : dims) count *= d;
  if (count * sizeof(T) < ResultPool::kMinBytes) return numpy_empty(shape, dtype_name<T>());
  using Block = ResultPool::Block;
  Block block{};
  block.data = ResultPool::instance().take(count * sizeof(T), block.bytes);
  Block* owned = nullptr;
  try {
    owned = new Block(block);
  } catch (...) {
    ResultPool::instance().give_back(block.data, block.bytes);
    throw;
  }
  // From here the capsule owns the block (it frees `owned` if what follows throws).
  nb::capsule owner(owned, [](void* p) noexcept {
    auto* b = static_cast<Block*>(p);
    ResultPool::instance().give_back(b->data, b->bytes);
    delete b;
  });
  return nb::cast(
      nb::ndarray<nb::numpy, T>(static_cast<T*>(block.data), dims.size(), dims.data(), owner));
}

}  // namespace sciproxy::python
