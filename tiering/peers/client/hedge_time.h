// HedgeTime: how long a hedged Fetch waits for a peer to begin answering
// before it reads SOURCE too: the p99 of the peer's last 128 answer
// latencies (from the request sent to the first byte back), within
// [floor, ceiling]; the ceiling while fewer than 16 are measured.
// Recomputed every 8 answers. Record is the progress thread's alone;
// after() may be read by any thread (PeerClient::Race).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace tierfs {

class HedgeTime {
 public:
  // PeerClientOptions' hedge_min and hedge_max.
  HedgeTime(std::chrono::microseconds floor, std::chrono::microseconds ceiling)
      : floor_(floor), ceiling_(ceiling) {}

  // An answer's latency. Progress thread.
  void Record(std::chrono::microseconds latency);
  // The time to wait now. Thread-safe.
  std::chrono::microseconds after() const;

  static constexpr size_t kAnswers = 128;    // the latencies kept
  static constexpr uint64_t kMeasured = 16;  // answers before the first p99
  static constexpr uint64_t kEvery = 8;      // answers between two p99s

 private:
  const std::chrono::microseconds floor_, ceiling_;
  std::array<uint32_t, kAnswers> answer_us_{};  // the last kAnswers, a ring
  uint64_t answers_ = 0;
  std::atomic<int64_t> after_us_{0};  // 0: none computed yet
};

}  // namespace tierfs
