// Owned arrays on whole cache lines, and on transparent huge pages when large.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace ppb {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter>;

// `bytes` (rounded up to a cache line) aligned to 64 bytes; arrays of 4 MiB
// and more are aligned to 2 MiB and advised onto transparent huge pages, as
// numpy does with its large arrays: on 4 KiB pages every random row read
// of a large table (an embedding lookup) would also be a TLB miss.
// std::bad_alloc when the memory is not there.
void* aligned_bytes(size_t bytes);

template <typename T>
AlignedArray<T> aligned_array(int64_t n) {
  return AlignedArray<T>(static_cast<T*>(aligned_bytes(static_cast<size_t>(n) * sizeof(T))));
}

}  // namespace ppb
