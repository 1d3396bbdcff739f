#include "fs/mount_checks.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tierfs {
namespace {

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string StaleMountMessage(const std::string& mountpoint) {
  return fmt::format(
      "MOUNTPOINT '{}' is a stale FUSE mount (its daemon died); clear it with: "
      "fusermount3 -u '{}'",
      mountpoint, mountpoint);
}

bool Resolve(const std::string& path, std::string* resolved) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return false;
  *resolved = buf;
  return true;
}

}  // namespace

bool IsMountPoint(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    if (fields >> id >> parent >> dev >> root >> mount_point && Unescape(mount_point) == path) {
      return true;
    }
  }
  return false;
}

Status CheckSource(const std::string& source, std::string* resolved) {
  const std::string named = fmt::format("SOURCE '{}'", source);
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) return Status::FromErrno(errno, named);
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, named + " is not a directory");
  if (::access(source.c_str(), R_OK | X_OK) != 0) {
    return Status::FromErrno(errno, named + " cannot be read");
  }
  if (!Resolve(source, resolved)) return Status::FromErrno(errno, named);
  return Status::Ok();
}

Status CheckMountpoint(const std::string& mountpoint, const std::string& source,
                       bool allow_nonempty, std::string* resolved) {
  const std::string named = fmt::format("MOUNTPOINT '{}'", mountpoint);
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    if (errno == ENOTCONN) return Status::Error(ENOTCONN, StaleMountMessage(mountpoint));
    return Status::FromErrno(errno, named);
  }
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, named + " is not a directory");
  if (!Resolve(mountpoint, resolved)) return Status::FromErrno(errno, named);
  if (*resolved == source) {
    return Status::Error(EINVAL, named + " is SOURCE itself; mount the mirror elsewhere");
  }
  if (IsMountPoint(*resolved)) {
    struct statvfs fs;
    if (::statvfs(resolved->c_str(), &fs) != 0 && errno == ENOTCONN) {  // attributes may be cached
      return Status::Error(ENOTCONN, StaleMountMessage(mountpoint));
    }
    return Status::Error(
        EBUSY, fmt::format("{} is busy: something is already mounted there (unmount it first, "
                           "e.g. fusermount3 -u '{}')",
                           named, mountpoint));
  }
  if (!allow_nonempty) {
    DIR* dir = ::opendir(resolved->c_str());
    if (dir == nullptr) return Status::FromErrno(errno, named);
    bool empty = true;
    while (struct dirent* de = ::readdir(dir)) {
      if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) {
        empty = false;
        break;
      }
    }
    ::closedir(dir);
    if (!empty) {
      return Status::Error(ENOTEMPTY, named +
                                          " is not empty; mounting would hide its files (use -o "
                                          "nonempty to mount anyway)");
    }
  }
  return Status::Ok();
}

}  // namespace tierfs
