// LatencyHistogram: a fixed-bucket histogram of durations, updated lock-free
// from any thread (one relaxed atomic add per sample and bucket).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tierfs {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets in microseconds; one more bucket is +Inf.
  static constexpr std::array<uint64_t, 14> kBoundsUs = {
      25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000};

  void Record(uint64_t micros) {
    size_t i = 0;
    while (i < kBoundsUs.size() && micros > kBoundsUs[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(micros, std::memory_order_relaxed);
  }
  // Samples at most kBoundsUs[i] (cumulative, as Prometheus wants); i ==
  // kBoundsUs.size() is the total.
  uint64_t CumulativeCount(size_t i) const {
    uint64_t n = 0;
    for (size_t j = 0; j <= i && j < counts_.size(); ++j) {
      n += counts_[j].load(std::memory_order_relaxed);
    }
    return n;
  }
  uint64_t count() const { return CumulativeCount(kBoundsUs.size()); }
  uint64_t sum_us() const { return sum_us_.load(std::memory_order_relaxed); }
  // {"bounds_us": [...], "cumulative": [...], "count": n, "sum_us": n}
  std::string Json() const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

}  // namespace tierfs
