#include "tiering/base/latency_histogram.h"

#include <fmt/format.h>

namespace tierfs {

std::string LatencyHistogram::Json() const {
  std::string bounds, cumulative;
  for (size_t i = 0; i < kBoundsUs.size(); ++i) {
    bounds += fmt::format("{}{}", i ? ", " : "", kBoundsUs[i]);
    cumulative += fmt::format("{}{}", i ? ", " : "", CumulativeCount(i));
  }
  return fmt::format("{{\"bounds_us\": [{}], \"cumulative\": [{}], \"count\": {}, \"sum_us\": {}}}",
                     bounds, cumulative, count(), sum_us());
}

}  // namespace tierfs
