#include "fs/mount/detached_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

// Where a detached daemon logs when there is no syslog: /var/log/tierfs/
// for root, ~/.local/state/tierfs/ (or $XDG_STATE_HOME/tierfs/) for a user;
// the file is named after the mount point. "" if no such place can be made.
std::string FallbackLogPath(const std::string& mountpoint) {
  std::string name = mountpoint;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  while (!name.empty() && name[0] == '_') name.erase(0, 1);
  if (name.empty()) name = "root";
  std::string dir;
  if (::geteuid() == 0) {
    dir = "/var/log/tierfs";
  } else if (const char* state = std::getenv("XDG_STATE_HOME"); state && state[0] == '/') {
    dir = std::string(state) + "/tierfs";
  } else if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    dir = std::string(home) + "/.local/state/tierfs";
  } else {
    return "";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0750);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return "";
  }
  return dir + "/" + name + ".log";
}

}  // namespace

void UseDetachedLog(const std::string& log_to, const std::string& mountpoint) {
  std::string target = log_to;
  bool fallback = false;
  if (target.empty()) {
    if (Log::SyslogAvailable()) {
      target = "syslog";
    } else {
      target = FallbackLogPath(mountpoint);
      fallback = true;
    }
  }
  if (target == "stderr") return;  // the detached daemon's stderr: kept as it is
  if (target == "syslog" || target.empty()) {
    if (target.empty()) {
      std::fprintf(stderr,
                   "tierfs: no syslog here (/dev/log) and no log directory: log lines "
                   "of the detached daemon are lost; use -o log=FILE\n");
    }
    Log::UseSyslog("tierfs");
    return;
  }
  if (int err = Log::UseFile(target); err < 0) {
    std::fprintf(stderr, "tierfs: cannot log to %s: %s; logging to syslog\n", target.c_str(),
                 std::strerror(-err));
    Log::UseSyslog("tierfs");
    return;
  }
  if (fallback) {
    std::fprintf(stderr, "tierfs: no syslog here (/dev/log): the daemon logs to %s\n",
                 target.c_str());
  }
}

}  // namespace tierfs
