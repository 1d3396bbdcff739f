#include "fs/config/config_checks.h"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

// A /proc/meminfo field in bytes; 0 if absent.
uint64_t MemInfo(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == field + ":") return kib * 1024;
  }
  return 0;
}

// "512.0 MiB", "16.0 GiB", "2.0 EiB".
std::string Human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

// Who holds directory tier `path`, when a live daemon serves it or is
// starting ("pid 123, mounted on /mnt/data"); "" when nobody does, or its
// holder is stopping (it was unmounted a moment ago: opening the tier waits
// for it to finish its promotions).
std::string LiveHolder(const std::string& path) {
  std::string note;
  if (!LockHolder(path + "/lock", &note)) return "";
  std::string pid, mount, state;
  size_t start = 0;
  while (start < note.size()) {
    size_t end = note.find('\n', start);
    if (end == std::string::npos) end = note.size();
    const std::string line = note.substr(start, end - start);
    start = end + 1;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "pid") pid = value;
    if (key == "mount") mount = value;
    if (key == "state") state = value;
  }
  if (state == "stopping" || state.empty()) return "";  // empty: an older tierfs; wait for it
  std::string who = pid.empty() ? "pid unknown" : "pid " + pid;
  if (!mount.empty()) return who + ", mounted on " + mount;
  return who + (state == "starting" ? ", starting" : "");
}

// What to do about tier directory `path` (lstat `st`) that UnsafeTierDirectory
// refused: a directory of one's own that no one else may write, in it when it
// is shared (sticky, as /dev/shm and /tmp, or another user's), else fixed in place.
std::string TierDirectoryFix(const std::string& path, const struct stat& st) {
  const bool mine = st.st_uid == ::geteuid();
  if (!mine || (st.st_mode & S_ISVTX) != 0) {
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    return fmt::format(
        "give a directory of your own that no one else may write, e.g. "
        "mkdir -m 700 {}/tierfs-$USER and tier={}/tierfs-$USER:SIZE",
        base == "/" ? "" : base, base == "/" ? "" : base);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("make it yours alone: chmod go-w '{}'", path);
  }
  return "give a directory whose every parent only root or you may write (or that has the "
         "sticky bit, as /tmp)";
}

// Why directory tier `path` (absolute) of `budget` bytes cannot be used
// now (ok if it can); doubts go to *warnings.
Status CheckTierDir(const std::string& path, uint64_t budget, std::vector<std::string>* warnings) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return Status::FromErrno(errno, fmt::format("tier '{}'", path));
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(
        ELOOP,
        fmt::format("tier '{}' is refused: it is a symbolic link (give the directory itself)",
                    path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(ENOTDIR, fmt::format("tier '{}' is not a directory", path));
  }
  if (Status why = UnsafeTierDirectory(path); !why.ok()) {
    return Status::Error(why.code(), fmt::format("tier '{}' is refused: {}; {}", path,
                                                 why.message(), TierDirectoryFix(path, st)));
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return Status::Error(EACCES,
                         fmt::format("tier '{}' is not writable by uid {}", path, ::geteuid()));
  }
  if (std::string holder = LiveHolder(path); !holder.empty()) {
    return Status::Error(
        EBUSY, fmt::format("tier '{}' is in use by another tierfs daemon ({}): unmount that one "
                           "first, or give this mount a tier directory of its own",
                           path, holder));
  }
  struct statvfs fs;
  if (::statvfs(path.c_str(), &fs) == 0) {
    const uint64_t total = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (total > 0 && budget > total) {
      warnings->push_back(
          fmt::format("tier '{}': {} is more than its file system holds ({}): "
                      "it will be full before its budget is",
                      path, Human(budget), Human(total)));
    } else if (budget > free) {
      warnings->push_back(fmt::format("tier '{}': {} is more than is free there now ({})", path,
                                      Human(budget), Human(free)));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckBeforeScan(const MountConfig& config, std::vector<std::string>* warnings) {
  const TieringConfig& t = config.tiering;
  for (const auto& d : t.dirs) {
    if (d.path.empty() || d.path[0] != '/') {
      return Status::Error(EINVAL, fmt::format("tier '{}' is not an absolute path", d.path));
    }
  }
  // A directory tier on tmpfs or ramfs (/dev/shm) is memory as the RAM tier is.
  uint64_t memory_tiers = 0;
  std::string memory_paths;
  for (const auto& d : t.dirs) {
    struct statfs fs;
    if (::statfs(d.path.c_str(), &fs) == 0 &&
        (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)) {
      memory_tiers += d.budget;
      memory_paths +=
          fmt::format("{}'{}' ({})", memory_paths.empty() ? "" : ", ", d.path, Human(d.budget));
    }
  }
  if (t.ram > 0 || memory_tiers > 0) {
    const uint64_t total = MemInfo("MemTotal"), available = MemInfo("MemAvailable");
    if (t.ram > 0 && t.ram < 4096) {
      return Status::Error(
          EINVAL, fmt::format("ram={} is {} byte(s): too small to hold a file (sizes take K, M, "
                              "G, T: ram=16G)",
                              t.ram, t.ram));
    }
    if (t.ram > 0 && total > 0 && t.ram > total) {
      return Status::Error(EINVAL, fmt::format("ram={} is more than this machine's memory ({})",
                                               Human(t.ram), Human(total)));
    }
    const uint64_t memory = t.ram + memory_tiers;
    const std::string both =
        t.ram > 0 ? fmt::format("ram={} and the memory-backed tier {}", Human(t.ram), memory_paths)
                  : fmt::format("the memory-backed tier {}", memory_paths);
    if (available > 0 && t.ram > available) {
      warnings->push_back(
          fmt::format("ram={} is more than the memory available now ({}): "
                      "the RAM tier may push other programs out",
                      Human(t.ram), Human(available)));
    } else if (memory_tiers > 0 && total > 0 && memory > total) {
      warnings->push_back(fmt::format(
          "{} together are more than this machine's memory ({}): a tmpfs tier is memory too, "
          "and both full would push other programs out or fail",
          both, Human(total)));
    } else if (memory_tiers > 0 && available > 0 && memory > available) {
      warnings->push_back(
          fmt::format("{} together are more than the memory available now ({}): a tmpfs tier is "
                      "memory too, and both full may push other programs out",
                      both, Human(available)));
    }
  }
  if (Status needs = t.CheckNeedsTier(); !needs.ok()) return needs;
  if (!config.log_to.empty() && config.log_to[0] == '/') {
    const std::string& log = config.log_to;
    const std::string dir = log.substr(0, log.rfind('/') + 1);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::Error(ENOENT, fmt::format("log={}: its directory does not exist", log));
    }
    if (::lstat(log.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return Status::Error(EINVAL, fmt::format("log={} is not a regular file", log));
    }
    if (::access(log.c_str(), F_OK) != 0 && ::access(dir.c_str(), W_OK | X_OK) != 0) {
      return Status::Error(
          EACCES, fmt::format("log={}: its directory is not writable by uid {}", log, ::geteuid()));
    }
  }
  if (std::find(config.fuse_options.begin(), config.fuse_options.end(), "ro") !=
      config.fuse_options.end()) {
    warnings->push_back(
        "ro: the kernel refuses every write to a read-only mount, the control files' too: no "
        "order hints, staging or mode switch through .tierfs (the mount is read-only without "
        "ro: writes to its files fail with EROFS)");
  }
  if (!t.enabled()) {
    warnings->push_back(
        "no tier (ram= or tier=): tierfs mirrors SOURCE and caches nothing beyond the kernel's "
        "page cache");
  }
  return Status::Ok();
}

Status CheckNamedPaths(const MountConfig& config, std::vector<std::string>* warnings) {
  for (const auto& d : config.tiering.dirs) {
    if (Status s = CheckTierDir(d.path, d.budget, warnings); !s.ok()) return s;
  }
  if (!config.index.empty() && config.index != "auto") {
    const std::string& index = config.index;
    const size_t slash = index.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : index.substr(0, slash + 1);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::Error(ENOENT, fmt::format("index '{}': its directory does not exist", index));
    }
    // Whether a file can be made there, tried (access() says yes to root
    // on file systems that refuse new files, such as /proc).
    std::string probe = dir + (dir.back() == '/' ? "" : "/") + ".tierfs-index-probe-XXXXXX";
    int fd = ::mkstemp(probe.data());
    if (fd < 0) {
      const int err = errno;
      return Status::Error(
          err, fmt::format("index '{}': its directory is not writable by uid {}: {}", index,
                           ::geteuid(), std::strerror(err)));
    }
    ::close(fd);
    ::unlink(probe.c_str());
  }
  return Status::Ok();
}

}  // namespace tierfs
