#include "tools/tierfs/mount_control.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tierfs::cli {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Reads all of fd; returns 0 or an errno.
int ReadAll(int fd, std::string* out) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
  }
}

// Whether some ancestor of `dir` (up to /) has `.tierfs/stats`.
bool InsideTierfsMount(const std::string& dir) {
  char resolved[PATH_MAX];
  if (!::realpath(dir.c_str(), resolved)) return false;
  std::string p = resolved;
  while (p.size() > 1) {
    size_t slash = p.find_last_of('/');
    p.erase(slash == 0 ? 1 : slash);
    struct stat st;
    if (::stat((p + (p == "/" ? "" : "/") + ".tierfs/stats").c_str(), &st) == 0) return true;
  }
  return false;
}

// For `mount` that this process may not enter (EACCES): when it is a FUSE
// mount of another user, why (FUSE lets no other user in, root neither,
// unless mounted with allow_root or allow_other) and what to do; "" if not.
std::string PrivateFuseMount(const std::string& mount) {
  std::error_code error;
  const std::string path = std::filesystem::absolute(mount, error).lexically_normal().string();
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS] - FSTYPE SOURCE SUPER_OPTIONS
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, word, fstype, source, super;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> word && word != "-") {
    }
    fields >> fstype >> source >> super;
    for (size_t at; (at = point.find("\\040")) != std::string::npos;) point.replace(at, 4, " ");
    if (point != path || fstype.rfind("fuse", 0) != 0) continue;
    const size_t uid_at = super.find("user_id=");
    const std::string uid = uid_at == std::string::npos
                                ? "?"
                                : super.substr(uid_at + 8, super.find(',', uid_at) - uid_at - 8);
    return fmt::format(
        "'{}' is a FUSE mount of uid {}, and FUSE lets no other user in, root neither, unless it "
        "was mounted with -o allow_root (or allow_other; as a user, both need user_allow_other "
        "in /etc/fuse.conf): run this as uid {} (sudo -u '#{}' ...) or remount with allow_root",
        mount, uid, uid, uid);
  }
  return "";
}

}  // namespace

std::string MountControl::WriteFailure(std::string_view name, int err) const {
  const std::string path = ControlPath(name);
  std::string s = fmt::format("writing {}: {}", path, ErrnoText(err));
  struct stat st;
  if ((err != EACCES && err != EPERM) || ::stat(path.c_str(), &st) != 0) return s;
  return s + fmt::format(
                 ": only root and uid {} may write it (the mount's owner, or whom its "
                 "control_owner= names); ask them, or mount with control_owner={} (or "
                 "control_owner=any for every user)",
                 st.st_uid, ::getuid());
}

MountControl::MountControl(std::string mount) : mount_(std::move(mount)) {
  while (mount_.size() > 1 && mount_.back() == '/') mount_.pop_back();
  struct stat st;
  if (::stat(mount_.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOTCONN) {
      throw ControlError(fmt::format(
          "'{}' is a stale FUSE mount (its daemon died); clear it with: fusermount3 -u '{}'",
          mount_, mount_));
    }
    if (err == EACCES) {
      if (std::string why = PrivateFuseMount(mount_); !why.empty()) throw ControlError(why);
    }
    throw ControlError(fmt::format("'{}': {}", mount_, ErrnoText(err)));
  }
  if (!S_ISDIR(st.st_mode)) throw ControlError(fmt::format("'{}' is not a directory", mount_));
  if (::stat(ControlPath("stats").c_str(), &st) == 0 && S_ISREG(st.st_mode)) return;
  int err = errno;
  if (err == ENOTCONN) {
    throw ControlError(fmt::format("'{}' is a stale FUSE mount; clear it with: fusermount3 -u '{}'",
                                   mount_, mount_));
  }
  if (InsideTierfsMount(mount_)) {
    throw ControlError(fmt::format(
        "'{}' is inside a tierfs mount but not its root; give the mount point itself", mount_));
  }
  throw ControlError(fmt::format("'{}' is not a tierfs mount (it has no .tierfs/stats)", mount_));
}

std::string MountControl::ControlPath(std::string_view name) const {
  return fmt::format("{}/.tierfs/{}", mount_ == "/" ? "" : mount_, name);
}

bool MountControl::HasControl(std::string_view name) const {
  struct stat st;
  return ::stat(ControlPath(name).c_str(), &st) == 0;
}

std::string MountControl::ReadControl(std::string_view name) const {
  std::string path = ControlPath(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ControlError(fmt::format("cannot open {}: {}", path, ErrnoText(errno)));
  std::string text;
  int err = ReadAll(fd, &text);
  ::close(fd);
  if (err) throw ControlError(fmt::format("cannot read {}: {}", path, ErrnoText(err)));
  return text;
}

std::string MountControl::ReadStatsText() const { return ReadControl("stats"); }

JsonValue MountControl::ReadStats() const {
  std::string text = ReadStatsText();
  Result<JsonValue> v = ParseJson(text);
  if (!v.ok() || !v->is_object()) {
    throw ControlError(fmt::format("{} is not a JSON object ({})", ControlPath("stats"),
                                   v.ok() ? "another JSON value" : v.status().message()));
  }
  return std::move(v).value();
}

int MountControl::WriteControl(std::string_view name, std::string_view data, bool truncate) const {
  std::string path = ControlPath(name);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND));
  if (fd < 0) return errno;
  int err = 0;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  return err;
}

std::string ReadInput(const std::string& path) {
  if (path == "-") {
    std::string text;
    int err = ReadAll(STDIN_FILENO, &text);
    if (err) throw ControlError(fmt::format("cannot read standard input: {}", ErrnoText(err)));
    return text;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ControlError(fmt::format("'{}': {}", path, ErrnoText(errno)));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw ControlError(fmt::format("'{}' is a directory, not a list of paths", path));
  }
  std::string text;
  int err = ReadAll(fd, &text);
  ::close(fd);
  if (err) throw ControlError(fmt::format("cannot read '{}': {}", path, ErrnoText(err)));
  return text;
}

}  // namespace tierfs::cli
