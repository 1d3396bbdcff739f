// LogLimiter: a flood of one log line a user causes becomes the first few
// lines of each interval and one line counting the rest.
#include "tiering/base/log_limiter.h"

#include <catch2/catch.hpp>

#include "tiering/base/log_cap.h"

namespace tierfs {
namespace {

using std::chrono::seconds;

TEST_CASE("LogLimiter admits a burst per interval, counts the rest and says them once", "[log]") {
  LogLimiter limiter(3, seconds(10));
  const auto t0 = LogLimiter::Clock::time_point() + seconds(1000);
  const uint64_t before = LogSuppressedLines();
  uint64_t suppressed = 0;
  double over_s = 0;
  int admitted = 0;
  for (int i = 0; i < 20000; ++i) admitted += limiter.Admit(t0, &suppressed, &over_s);
  CHECK(admitted == 3);
  CHECK(LogSuppressedLines() - before == 19997);
  // The next interval: admitted again, with the count of what was left out.
  REQUIRE(limiter.Admit(t0 + seconds(11), &suppressed, &over_s));
  CHECK(suppressed == 19997);
  CHECK(over_s == Approx(11.0));
  REQUIRE(limiter.Admit(t0 + seconds(12), &suppressed, &over_s));
  CHECK(suppressed == 0);  // said once
}

TEST_CASE("TIERFS_LOG_SAMPLED writes a call site's first lines and suppresses the rest", "[log]") {
  const uint64_t before = LogSuppressedLines();
  for (int i = 0; i < 100; ++i) TIERFS_LOG_SAMPLED(kError, "line {}", i);
  CHECK(LogSuppressedLines() - before == 100 - LogLimiter::kBurst);
}

}  // namespace
}  // namespace tierfs
