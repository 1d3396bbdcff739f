#include "tiering/log.h"

#include <syslog.h>

#include <cstdio>
#include <exception>

namespace tierfs {

std::atomic<LogLevel> Log::level_{kInfo};
std::atomic<bool> Log::syslog_{false};

bool Log::ParseLevel(std::string_view text, LogLevel* out) {
  static constexpr std::string_view kNames[] = {"error", "warning", "info", "debug"};
  for (int i = 0; i < 4; ++i) {
    if (text == kNames[i]) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void Log::UseSyslog(const char* ident) {
  ::openlog(ident, LOG_PID, LOG_DAEMON);
  syslog_.store(true);
}

void Log::Write(LogLevel level, std::string_view line) {
  static constexpr int kPriority[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
  static constexpr const char* kTag[] = {"error", "warning", "info", "debug"};
  if (syslog_.load()) {
    ::syslog(kPriority[level], "%.*s", static_cast<int>(line.size()), line.data());
  } else {
    // One fprintf per line keeps concurrent lines whole.
    std::fprintf(stderr, "tierfs: %s: %.*s\n", kTag[level], static_cast<int>(line.size()),
                 line.data());
  }
}

std::string DescribeCurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace tierfs
