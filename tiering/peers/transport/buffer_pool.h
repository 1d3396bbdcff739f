// BufferPool: buffers for peer transfers, kept for reuse. A fresh buffer
// of a MiB costs 256 page faults and the kernel's zeroing on first touch
// (glibc maps allocations that large and unmaps them when freed); a peer
// answer needs one on each side, so they are kept by size class (powers of
// two from 4 KiB) up to `max_kept` bytes in all. Buffers are left out of
// core dumps (UndumpedMemory). Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/base/undumped_memory.h"

namespace tierfs {

class BufferPool {
 public:
  struct Buffer {
    UndumpedMemory data;
    size_t capacity = 0;
    char* get() const { return data.get(); }
  };

  explicit BufferPool(size_t max_kept) : max_kept_(max_kept) {}
  // A buffer of at least `size` bytes (its content undefined).
  Buffer Take(size_t size);
  // Keeps `b` for a later Take if there is room; else frees it.
  void Give(Buffer b);

 private:
  static constexpr int kClasses = 31;  // 4 KiB (class 0) .. 4 TiB
  static int ClassOf(size_t size);

  const size_t max_kept_;
  Mutex mu_;  // guards free_ and kept_. A leaf lock.
  std::vector<Buffer> free_[kClasses] GUARDED_BY(mu_);
  size_t kept_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierfs
