// Logging: one line per notable event, never one per read. Goes to stderr
// until the daemon detaches, then to syslog (the journal under systemd) or
// to a file (-o log=FILE, or where there is no syslog).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierfs {

enum LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// Thread-safe. Lines below the current level are dropped before formatting.
class Log {
 public:
  static bool Enabled(LogLevel level) { return level <= level_.load(std::memory_order_relaxed); }
  static void SetLevel(LogLevel level) { level_.store(level); }
  // Parses "error", "warning", "info" or "debug"; false if none matches.
  static bool ParseLevel(std::string_view text, LogLevel* out);
  // Sends every later line to syslog under `ident` instead of stderr.
  static void UseSyslog(const char* ident);
  // Appends every later line, with a timestamp and the pid, to `path`
  // (created 0640 if missing, never through a symbolic link). 0 or -errno.
  static int UseFile(const std::string& path);
  // Whether lines go to syslog now (UseSyslog, and no UseFile since).
  static bool ToSyslog() { return syslog_.load() && fd_.load() < 0; }
  // Whether syslog can take lines here (/dev/log is a socket).
  static bool SyslogAvailable();
  static void Write(LogLevel level, std::string_view line);

 private:
  static std::atomic<LogLevel> level_;
  static std::atomic<bool> syslog_;
  static std::atomic<int> fd_;  // the log file's, or -1
};

// Whether the n-th event of a kind (from 1) is worth a log line: the first
// ten, then every thousandth, so that a flood (hostile connections, forged
// messages) cannot fill the log.
inline bool LogSampled(uint64_t n) { return n <= 10 || n % 1000 == 0; }

// What the exception being handled says: its what(), or "unknown exception".
// REQUIRES: called inside a catch block.
std::string DescribeCurrentException();

}  // namespace tierfs

#define TIERFS_LOG(level, ...)                                           \
  do {                                                                   \
    if (::tierfs::Log::Enabled(::tierfs::level))                         \
      ::tierfs::Log::Write(::tierfs::level, ::fmt::format(__VA_ARGS__)); \
  } while (0)
