#include "fs/mount/mount_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

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

// Where libfuse looks for fusermount3: its install directory, then PATH.
// "" if nowhere.
std::string FindFusermount() {
  std::vector<std::string> dirs = {"/usr/bin", "/bin"};
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/fusermount3";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// True if `conf` (fuse.conf) has the line user_allow_other, as fusermount3
// reads it: blanks around it and a '#' comment after it ignored.
bool UserAllowOther(const std::string& conf) {
  std::ifstream in(conf);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos) continue;
    const size_t end = line.find_last_not_of(" \t\r");
    if (line.substr(begin, end - begin + 1) == "user_allow_other") return true;
  }
  return false;
}

// Why /dev/fuse cannot be opened by this process; "" if it can.
std::string FuseDeviceProblem() {
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return "";
  }
  const int err = errno;
  if (err == ENOENT || err == ENODEV || err == ENXIO) {
    return "/dev/fuse does not exist: load the fuse module (modprobe fuse), or in a container "
           "pass the device in (docker run --device /dev/fuse)";
  }
  struct stat st {};
  std::string mode;
  if (::stat("/dev/fuse", &st) == 0) {
    mode = fmt::format(" (mode {:04o}, owner uid {})", st.st_mode & 07777, st.st_uid);
  }
  return fmt::format(
      "/dev/fuse cannot be opened by uid {}{}: {}; it must be readable and writable by the user "
      "who mounts (Debian makes it 0666)",
      ::geteuid(), mode, std::strerror(err));
}

}  // namespace

Status CheckFuseMount(const std::string& mountpoint, const std::vector<std::string>& fuse_options,
                      const std::string& fuse_conf) {
  std::vector<std::string> problems;
  bool machine = false, place = false;  // this machine's setup; the mount point's
  if (std::string device = FuseDeviceProblem(); !device.empty()) {
    problems.push_back(device);
    machine = true;
  }
  const uid_t uid = ::getuid();
  if (::geteuid() != 0) {  // root mounts with mount(2); a user through fusermount3
    const std::string fusermount = FindFusermount();
    struct stat st {};
    if (fusermount.empty()) {
      machine = true;
      problems.push_back(
          "fusermount3 is not installed (Debian package fuse3): a user other than root mounts "
          "through it");
    } else if (::stat(fusermount.c_str(), &st) == 0 &&
               (st.st_uid != 0 || (st.st_mode & S_ISUID) == 0)) {
      machine = true;
      problems.push_back(fmt::format(
          "{} is not set-uid root: a user other than root cannot mount with it", fusermount));
    }
    if (::stat(mountpoint.c_str(), &st) == 0 && (st.st_mode & S_ISVTX) && st.st_uid != uid) {
      place = true;
      problems.push_back(fmt::format(
          "MOUNTPOINT '{}' is sticky and owned by uid {}: fusermount3 mounts only on a sticky "
          "directory of one's own (make a directory of your own)",
          mountpoint, st.st_uid));
    } else if (::access(mountpoint.c_str(), W_OK) != 0) {
      place = true;
      problems.push_back(fmt::format(
          "MOUNTPOINT '{}' is not writable by uid {}: fusermount3 mounts only where the user may "
          "write (make a directory of your own)",
          mountpoint, uid));
    }
    for (const char* option : {"allow_other", "allow_root"}) {
      if (std::find(fuse_options.begin(), fuse_options.end(), option) != fuse_options.end() &&
          !UserAllowOther(fuse_conf)) {
        problems.push_back(fmt::format(
            "{} is allowed to users other than root only if {} has the line 'user_allow_other' "
            "(ask the administrator for it, or mount without {})",
            option, fuse_conf, option));
      }
    }
  }
  if (problems.empty()) return Status::Ok();
  const int code = machine ? ENODEV : place ? EACCES : EPERM;
  std::string message = fmt::format("cannot mount on '{}'", mountpoint);
  if (problems.size() == 1) return Status::Error(code, message + ": " + problems[0]);
  message += ":";
  for (const std::string& p : problems) message += "\n  " + p;
  return Status::Error(code, message);
}

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

bool EmptyDirectory(DIR* dir) {
  bool empty = true;
  while (struct dirent* de = ::readdir(dir)) {
    if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(dir);
  return empty;
}

bool SourceWithin(const std::string& source, const std::string& mountpoint) {
  if (source == mountpoint) return true;
  if (mountpoint.empty() || mountpoint == "/") return false;  // "/" is MOUNTPOINT's own failure
  return source.size() > mountpoint.size() &&
         source.compare(0, mountpoint.size(), mountpoint) == 0 && source[mountpoint.size()] == '/';
}

Status CheckSourceApart(const std::string& source, const std::string& mountpoint) {
  std::string resolved;
  if (!Resolve(mountpoint, &resolved) || !SourceWithin(source, resolved)) return Status::Ok();
  const std::string named = fmt::format("SOURCE '{}'", source);
  if (source == resolved) {
    return Status::Error(EINVAL, fmt::format("{} is MOUNTPOINT '{}' itself; mount the mirror "
                                             "elsewhere, or give SOURCE the dataset's directory",
                                             named, mountpoint));
  }
  return Status::Error(EINVAL, fmt::format("{} is inside MOUNTPOINT '{}': the mount would hide "
                                           "it; give SOURCE a directory outside the mount point",
                                           named, mountpoint));
}

Status CheckMountpoint(const std::string& mountpoint, bool allow_nonempty, std::string* resolved) {
  const std::string named = fmt::format("MOUNTPOINT '{}'", mountpoint);
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    if (errno == ENOTCONN) return Status::Error(ENOTCONN, StaleMountMessage(mountpoint));
    return Status::FromErrno(errno, named);
  }
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, named + " is not a directory");
  if (!Resolve(mountpoint, resolved)) return Status::FromErrno(errno, named);
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
    if (!EmptyDirectory(dir)) {
      return Status::Error(ENOTEMPTY, named +
                                          " is not empty; mounting would hide its files (use -o "
                                          "nonempty to mount anyway)");
    }
  }
  return Status::Ok();
}

}  // namespace tierfs
