#include "tiering/base/log_limiter.h"

#include "tiering/base/log_cap.h"

namespace tierfs {

bool LogLimiter::Admit(Clock::time_point now, uint64_t* suppressed, double* over_s) {
  *suppressed = 0;
  *over_s = 0;
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  int64_t start = window_start_ns_.load(std::memory_order_relaxed);
  if ((start == INT64_MIN || now_ns - start >= interval_ns_) &&
      window_start_ns_.compare_exchange_strong(start, now_ns, std::memory_order_relaxed)) {
    in_window_.store(0, std::memory_order_relaxed);  // this thread opened the interval
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) >= burst_) {
    if (unsaid_.fetch_add(1, std::memory_order_relaxed) == 0) {
      first_suppressed_ns_.store(now_ns, std::memory_order_relaxed);
    }
    NoteLogSuppressed(1);
    return false;
  }
  if (const uint64_t n = unsaid_.exchange(0, std::memory_order_relaxed); n > 0) {
    *suppressed = n;
    *over_s =
        static_cast<double>(now_ns - first_suppressed_ns_.load(std::memory_order_relaxed)) / 1e9;
  }
  return true;
}

void WriteSampled(LogLimiter& limiter, LogLevel level, std::string_view line) {
  uint64_t suppressed = 0;
  double over_s = 0;
  if (!limiter.Admit(LogLimiter::Clock::now(), &suppressed, &over_s)) return;
  if (suppressed > 0) {
    Log::Write(level, fmt::format("{} more like this suppressed in the last {:.0f} s", suppressed,
                                  over_s));
  }
  Log::Write(level, line);
}

}  // namespace tierfs
