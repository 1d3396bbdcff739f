#include "tiering/peers/transport/buffer_pool.h"

#include <bit>

namespace tierfs {

int BufferPool::ClassOf(size_t size) {
  size_t pages = (size + 4095) / 4096;
  if (pages <= 1) return 0;
  int c = std::bit_width(pages - 1);  // the power of two that holds it
  return c < kClasses ? c : kClasses - 1;
}

BufferPool::Buffer BufferPool::Take(size_t size) {
  const int c = ClassOf(size);
  const size_t capacity = size_t{4096} << c;
  if (capacity >= size) {
    MutexLock lock(mu_);
    if (!free_[c].empty()) {
      Buffer b = std::move(free_[c].back());
      free_[c].pop_back();
      kept_ -= b.capacity;
      return b;
    }
  }
  const size_t n = capacity >= size ? capacity : size;  // beyond the classes: exact
  return Buffer{MapUndumped(n), n};
}

void BufferPool::Give(Buffer b) {
  if (!b.data) return;
  const int c = ClassOf(b.capacity);
  if ((size_t{4096} << c) != b.capacity) return;  // not one of ours
  MutexLock lock(mu_);
  if (kept_ + b.capacity > max_kept_) return;  // freed
  kept_ += b.capacity;
  free_[c].push_back(std::move(b));
}

}  // namespace tierfs
