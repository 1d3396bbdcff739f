// The timing model of pfs-sim: a pool of servers in front of a shared link.
//
// A request that arrives at time t takes the server that frees first, waits
// for it, pays a fixed latency, then moves its bytes at the per-stream rate;
// the bytes also pass the aggregate link, which moves one request's bytes at a
// time at the aggregate rate. So one sequential reader of requests of S bytes
// gets S / (latency + S / stream) bytes per second, k <= slots readers get k
// times that, and no number of readers gets more than the aggregate rate.
//
// The model is pure arithmetic on a clock the caller passes in, so tests can
// drive it with a fake clock. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <vector>

namespace pfssim {

class ServicePool {
 public:
  // `latency_ns` per request; `stream_bytes_per_s` and `link_bytes_per_s`
  // may be 0 for "unlimited". REQUIRES: slots >= 1.
  ServicePool(unsigned slots, int64_t latency_ns, double stream_bytes_per_s,
              double link_bytes_per_s);

  // Books a request of `bytes` arriving at `now_ns`, served `extra_ns` longer
  // than the model says (an injected stall). Returns when it completes.
  int64_t Book(int64_t now_ns, uint64_t bytes, int64_t extra_ns = 0);

 private:
  const int64_t latency_ns_;
  const double stream_bytes_per_s_;
  const double link_bytes_per_s_;
  std::mutex mu_;  // guards free_at_ and link_free_at_
  // When each server frees up; a min-heap.
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> free_at_;
  int64_t link_free_at_ = 0;
};

}  // namespace pfssim
