#include "tiering/base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tierfs {

void ParallelFor(size_t count, unsigned threads, const std::function<void(size_t)>& item) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) item(i);
  };
  const size_t n = std::max<size_t>(1, std::min<size_t>(threads, count));
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();  // the caller's thread is one of them
  for (auto& t : pool) t.join();
}

}  // namespace tierfs
