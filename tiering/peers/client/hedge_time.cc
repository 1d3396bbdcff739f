#include "tiering/peers/client/hedge_time.h"

#include <algorithm>

namespace tierfs {

using std::chrono::microseconds;

void HedgeTime::Record(microseconds latency) {
  answer_us_[answers_ % kAnswers] =
      static_cast<uint32_t>(std::clamp<int64_t>(latency.count(), 0, UINT32_MAX));
  ++answers_;
  if (answers_ < kMeasured || answers_ % kEvery != 0) return;
  const size_t n = std::min<uint64_t>(answers_, kAnswers);
  std::array<uint32_t, kAnswers> sorted = answer_us_;
  auto p99 = sorted.begin() + static_cast<std::ptrdiff_t>(n * 99 / 100);
  std::nth_element(sorted.begin(), p99, sorted.begin() + static_cast<std::ptrdiff_t>(n));
  const auto ceiling = std::max(floor_, ceiling_);
  after_us_.store(std::clamp(microseconds(*p99), floor_, ceiling).count(),
                  std::memory_order_relaxed);
}

microseconds HedgeTime::after() const {
  const int64_t us = after_us_.load(std::memory_order_relaxed);
  return us > 0 ? microseconds(us) : ceiling_;
}

}  // namespace tierfs
