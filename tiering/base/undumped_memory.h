// UndumpedMemory: anonymous memory left out of core dumps (MADV_DONTDUMP),
// for the buffers that hold file bytes (a reader's, a promotion's, a
// peer's): a core of a root daemon is then its state, not other users'
// data. Whole pages, private, zero-filled on first touch.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <new>

namespace tierfs {

struct UnmapUndumped {
  size_t size = 0;
  void operator()(char* p) const {
    if (p != nullptr) ::munmap(p, size);
  }
};
using UndumpedMemory = std::unique_ptr<char, UnmapUndumped>;

// At least `size` bytes (rounded up to whole pages). Throws std::bad_alloc
// if there is no memory, as new would.
inline UndumpedMemory MapUndumped(size_t size) {
  constexpr size_t kPage = 4096;
  const size_t span = (size == 0 ? 1 : size + kPage - 1) / kPage * kPage;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, span, MADV_DONTDUMP);  // a core without it is the only loss
  return UndumpedMemory(static_cast<char*>(p), UnmapUndumped{span});
}

}  // namespace tierfs
