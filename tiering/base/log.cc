#include "tiering/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>

#include "tiering/base/log_cap.h"

namespace tierfs {

std::atomic<LogLevel> Log::level_{kInfo};
std::atomic<bool> Log::syslog_{false};
std::atomic<int> Log::fd_{-1};

namespace {
std::atomic<int> file_fd{-1};            // Log::fd_, for the cap
std::atomic<uint64_t> cap{0};            // 0: no cap
std::atomic<uint64_t> written{0};        // bytes in the capped file, its size when taken
std::atomic<bool> stderr_capped{false};  // stderr is a regular file under the cap
std::atomic<uint64_t> dropped{0};
std::atomic<uint64_t> suppressed{0};

// Whether `n` more bytes fit below the cap of the target `fd`; counts the
// line dropped and writes the cap's line when not.
bool Room(int fd, size_t n) {
  const uint64_t limit = cap.load(std::memory_order_relaxed);
  if (limit == 0) return true;
  // Lines leave room for the cap's own line at the end.
  const uint64_t lines_limit = limit - std::min<uint64_t>(256, limit / 2);
  uint64_t had = written.load(std::memory_order_relaxed);
  while (had + n <= lines_limit &&
         !written.compare_exchange_weak(had, had + n, std::memory_order_relaxed)) {
  }
  if (had + n <= lines_limit) return true;
  if (dropped.fetch_add(1, std::memory_order_relaxed) == 0) {
    const std::string note = fmt::format(
        "tierfs[{}]: warning: the log reached its cap (log_max={} bytes): later lines are "
        "dropped and counted (log.dropped_lines in .tierfs/stats)\n",
        ::getpid(), limit);
    had = written.load(std::memory_order_relaxed);
    while (had + note.size() <= limit &&
           !written.compare_exchange_weak(had, had + note.size(), std::memory_order_relaxed)) {
    }
    if (had + note.size() <= limit) [[maybe_unused]]
      ssize_t w = ::write(fd, note.data(), note.size());
  }
  return false;
}
}  // namespace

void SetLogFileCap(uint64_t bytes) {
  struct stat st;
  const int fd = file_fd.load();
  const bool regular = ::fstat(fd >= 0 ? fd : STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode);
  stderr_capped.store(fd < 0 && regular);
  written.store(regular ? static_cast<uint64_t>(st.st_size) : 0);
  cap.store(bytes);
}

uint64_t LogDroppedLines() { return dropped.load(std::memory_order_relaxed); }
uint64_t LogSuppressedLines() { return suppressed.load(std::memory_order_relaxed); }
void NoteLogSuppressed(uint64_t n) { suppressed.fetch_add(n, std::memory_order_relaxed); }

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
  struct stat st;
  written.store(::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0);
  file_fd.store(fd);
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
    if (!Room(fd, text.size())) return;
    [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
    return;
  }
  if (syslog_.load()) {
    ::syslog(kPriority[level], "%.*s", static_cast<int>(line.size()), line.data());
  } else {
    // One fprintf per line keeps concurrent lines whole.
    if (stderr_capped.load(std::memory_order_relaxed) &&
        !Room(STDERR_FILENO, line.size() + 11 + std::strlen(kTag[level]))) {
      return;
    }
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
