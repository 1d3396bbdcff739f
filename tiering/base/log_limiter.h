// LogLimiter: sampling for the log lines a user's action can cause (a reader
// of the mount, a peer, a control-file writer), so that no user can fill a
// root daemon's log. One limiter per call site (TIERFS_LOG_SAMPLED makes
// it): the first `burst` lines of each interval are written, the rest are
// counted (LogSuppressedLines) and said as one line, "N more like this
// suppressed in the last T s", with the first line written after them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tiering/base/log.h"

namespace tierfs {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kBurst = 10;
  static constexpr std::chrono::seconds kInterval{60};

  constexpr LogLimiter() = default;
  constexpr LogLimiter(uint32_t burst, std::chrono::nanoseconds interval)
      : burst_(burst), interval_ns_(interval.count()) {}

  // Whether a line may be written at `now`. When it may and lines were
  // suppressed before it, *suppressed is their count and *over_s the
  // seconds they were suppressed over (else 0). Thread-safe, lock-free;
  // under a race a few lines more or less than `burst` may pass.
  bool Admit(Clock::time_point now, uint64_t* suppressed, double* over_s);

 private:
  const uint32_t burst_ = kBurst;
  const int64_t interval_ns_ = std::chrono::nanoseconds(kInterval).count();
  std::atomic<int64_t> window_start_ns_{INT64_MIN};  // of the current interval
  std::atomic<int64_t> first_suppressed_ns_{0};      // when the unsaid suppressions began
  std::atomic<uint32_t> in_window_{0};               // lines of the current interval
  std::atomic<uint64_t> unsaid_{0};                  // suppressed, not yet said
};

// Writes the line (and the count of the lines suppressed before it) if
// `limiter` admits it now.
void WriteSampled(LogLimiter& limiter, LogLevel level, std::string_view line);

}  // namespace tierfs

// TIERFS_LOG for a line a user's action triggers: sampled per call site.
#define TIERFS_LOG_SAMPLED(level, ...)                                                          \
  do {                                                                                          \
    static ::tierfs::LogLimiter tierfs_log_limiter_;                                            \
    if (::tierfs::Log::Enabled(::tierfs::level))                                                \
      ::tierfs::WriteSampled(tierfs_log_limiter_, ::tierfs::level, ::fmt::format(__VA_ARGS__)); \
  } while (0)
