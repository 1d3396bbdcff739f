#include "tiering/store/tier.h"

namespace tierfs {

bool Tier::Reserve(uint64_t n, uint64_t keep_free) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  const uint64_t limit = this->limit();
  do {
    if (n > limit || keep_free > limit - n || used > limit - n - keep_free) return false;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return true;
}

void Tier::Release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

}  // namespace tierfs
