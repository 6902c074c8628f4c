// Large fields in huge pages (src/core/large_pages.hpp).
#include "core/large_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace sciproxy {
namespace {
constexpr std::uintptr_t kHugePage = std::uintptr_t(2) << 20;
}

void advise_large_pages(void* p, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < kLargePageThreshold) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / kHugePage * kHugePage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void* allocate_zeroed(std::size_t bytes) {
  if (bytes < kLargePageThreshold) {
    void* p = std::calloc(bytes, 1);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  advise_large_pages(p, bytes);
  return p;
}

void release_zeroed(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kLargePageThreshold)
    std::free(p);
  else
    munmap(p, bytes);
}

}  // namespace sciproxy
