#include "tiering/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>

namespace tierfs {

std::atomic<LogLevel> Log::level_{kInfo};
std::atomic<bool> Log::syslog_{false};
std::atomic<int> Log::fd_{-1};

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

int Log::UseFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (fd < 0) return -errno;
  int old = fd_.exchange(fd);
  if (old >= 0) ::close(old);
  syslog_.store(false);
  return 0;
}

bool Log::SyslogAvailable() {
  struct stat st;
  return ::stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode);
}

void Log::Write(LogLevel level, std::string_view line) {
  static constexpr int kPriority[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
  static constexpr const char* kTag[] = {"error", "warning", "info", "debug"};
  if (int fd = fd_.load(); fd >= 0) {
    // One write per line (O_APPEND): concurrent lines stay whole.
    std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    ::localtime_r(&now, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string text = fmt::format("{} tierfs[{}]: {}: {}\n", when, ::getpid(), kTag[level], line);
    [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
    return;
  }
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
