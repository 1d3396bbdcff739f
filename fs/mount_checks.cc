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

std::string CheckSource(const std::string& source, std::string* resolved) {
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) {
    return fmt::format("SOURCE '{}': {}", source, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("SOURCE '{}' is not a directory", source);
  if (::access(source.c_str(), R_OK | X_OK) != 0) {
    return fmt::format("SOURCE '{}' cannot be read: {}", source, std::strerror(errno));
  }
  if (!Resolve(source, resolved)) {
    return fmt::format("SOURCE '{}': {}", source, std::strerror(errno));
  }
  return "";
}

std::string CheckMountpoint(const std::string& mountpoint, const std::string& source,
                            bool allow_nonempty, std::string* resolved) {
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    if (errno == ENOTCONN) {
      return StaleMountMessage(mountpoint);
    }
    return fmt::format("MOUNTPOINT '{}': {}", mountpoint, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("MOUNTPOINT '{}' is not a directory", mountpoint);
  if (!Resolve(mountpoint, resolved)) {
    return fmt::format("MOUNTPOINT '{}': {}", mountpoint, std::strerror(errno));
  }
  if (*resolved == source) {
    return fmt::format("MOUNTPOINT '{}' is SOURCE itself; mount the mirror elsewhere", mountpoint);
  }
  if (IsMountPoint(*resolved)) {
    struct statvfs fs;
    if (::statvfs(resolved->c_str(), &fs) != 0 && errno == ENOTCONN) {  // attributes may be cached
      return StaleMountMessage(mountpoint);
    }
    return fmt::format(
        "MOUNTPOINT '{}' is busy: something is already mounted there (unmount it first, e.g. "
        "fusermount3 -u '{}')",
        mountpoint, mountpoint);
  }
  if (!allow_nonempty) {
    DIR* dir = ::opendir(resolved->c_str());
    if (dir == nullptr) {
      return fmt::format("MOUNTPOINT '{}': {}", mountpoint, std::strerror(errno));
    }
    bool empty = true;
    while (struct dirent* de = ::readdir(dir)) {
      if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) {
        empty = false;
        break;
      }
    }
    ::closedir(dir);
    if (!empty) {
      return fmt::format(
          "MOUNTPOINT '{}' is not empty; mounting would hide its files (use -o nonempty to "
          "mount anyway)",
          mountpoint);
    }
  }
  return "";
}

}  // namespace tierfs
