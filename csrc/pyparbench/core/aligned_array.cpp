#include "pyparbench/core/aligned_array.hpp"

#include <sys/mman.h>

#include <new>

namespace ppb {

namespace {

constexpr size_t kLine = 64;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeFrom = size_t{4} << 20;

}  // namespace

void* aligned_bytes(size_t bytes) {
  const bool huge = bytes >= kHugeFrom;
  const size_t align = huge ? kHugePage : kLine;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size == 0 ? align : size);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) madvise(p, size, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}

}  // namespace ppb
