// Memory for the fields of large grids, first touched in 2 MiB pages where the kernel allows it
// (transparent huge pages on request, `madvise` mode): a 3-D field of tens of megabytes then costs
// 512 times fewer page faults. At 128^3 + PML a scalar forward call allocates and fills about 20
// such fields (its state and its padded copies), and their 4 KiB faults took about a fifth of a
// 100-step call (bench/scalar_cpu_notes.md). Every function is only advice to the kernel: where
// huge pages are off or none is free, the memory is the same, in 4 KiB pages.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace sciproxy {

// Below this, memory comes from malloc as usual.
inline constexpr std::size_t kLargePageThreshold = std::size_t(4) << 20;

// Asks for huge pages over the 2 MiB-aligned part of [p, p + bytes) (nothing below the
// threshold). Call it before the memory is first touched.
void advise_large_pages(void* p, std::size_t bytes);

// Zeroed memory: above the threshold an anonymous mapping advised for huge pages, whose pages
// cost nothing until touched; below, calloc. Release with release_zeroed(p, bytes).
void* allocate_zeroed(std::size_t bytes);
void release_zeroed(void* p, std::size_t bytes) noexcept;

// allocate_zeroed as an owning pointer to n values of T.
struct ZeroedFree {
  std::size_t bytes = 0;
  void operator()(void* p) const noexcept { release_zeroed(p, bytes); }
};
template <class T>
using ZeroedBuffer = std::unique_ptr<T[], ZeroedFree>;
template <class T>
ZeroedBuffer<T> zeroed_buffer(std::size_t n) {
  const std::size_t bytes = (n > 0 ? n : 1) * sizeof(T);
  return ZeroedBuffer<T>(static_cast<T*>(allocate_zeroed(bytes)), ZeroedFree{bytes});
}

// v becomes n zeros (or a copy of `from`), its memory advised before it is first written.
template <class T>
void assign_zeros(std::vector<T>& v, std::size_t n) {
  std::vector<T>().swap(v);
  v.reserve(n);
  advise_large_pages(v.data(), n * sizeof(T));
  v.resize(n);
}
template <class T>
void assign_copy(std::vector<T>& v, const std::vector<T>& from) {
  std::vector<T>().swap(v);
  v.reserve(from.size());
  advise_large_pages(v.data(), from.size() * sizeof(T));
  v.assign(from.begin(), from.end());
}

}  // namespace sciproxy
