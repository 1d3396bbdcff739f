#include "service_model.h"

#include <algorithm>

namespace pfssim {
namespace {

int64_t TransferNs(uint64_t bytes, double bytes_per_s) {
  if (bytes_per_s <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / bytes_per_s);
}

}  // namespace

ServicePool::ServicePool(unsigned slots, int64_t latency_ns, double stream_bytes_per_s,
                         double link_bytes_per_s)
    : latency_ns_(latency_ns),
      stream_bytes_per_s_(stream_bytes_per_s),
      link_bytes_per_s_(link_bytes_per_s) {
  for (unsigned i = 0; i < std::max(1u, slots); ++i) free_at_.push(0);
}

int64_t ServicePool::Book(int64_t now_ns, uint64_t bytes, int64_t extra_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t start = std::max(now_ns, free_at_.top());
  free_at_.pop();
  const int64_t data_start = start + latency_ns_;
  int64_t finish = data_start + TransferNs(bytes, stream_bytes_per_s_);
  if (link_bytes_per_s_ > 0 && bytes > 0) {
    const int64_t link_start = std::max(data_start, link_free_at_);
    link_free_at_ = link_start + TransferNs(bytes, link_bytes_per_s_);
    finish = std::max(finish, link_free_at_);
  }
  finish += std::max<int64_t>(0, extra_ns);
  free_at_.push(finish);
  return finish;
}

}  // namespace pfssim
