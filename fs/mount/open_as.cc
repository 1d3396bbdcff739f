#include "fs/mount/open_as.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fs/mount/mount_checks.h"
#include "tiering/io/fs_credentials.h"

namespace tierfs {
namespace {

std::string FdPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

// Where the kernel says an open directory is ("" if it cannot say).
std::string Shown(int fd) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(FdPath(fd).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// uid's supplementary groups as login would give them (its passwd name's
// groups, gid included); just gid if uid has no passwd entry.
std::vector<gid_t> GroupsOf(uid_t uid, gid_t gid) {
  struct passwd pw, *found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return {gid};
  }
  std::vector<gid_t> groups(64);
  for (int tries = 0; tries < 8; ++tries) {
    int n = static_cast<int>(groups.size());
    if (::getgrouplist(pw.pw_name, gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    groups.resize(static_cast<size_t>(n) > groups.size() ? static_cast<size_t>(n)
                                                         : groups.size() * 2);
  }
  return {gid};
}

// Splits MOUNTPOINT into its parent directory and last name; "" leaf if it
// has none (/, ., ..).
void SplitMountpoint(std::string path, std::string* parent, std::string* leaf) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  *leaf = slash == std::string::npos ? path : path.substr(slash + 1);
  *parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (*leaf == "." || *leaf == ".." || *leaf == "/") leaf->clear();
}

}  // namespace

OpenedAs::~OpenedAs() {
  for (int fd : {source_fd_, mount_parent_fd_, mount_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string OpenedAs::source_path() const { return FdPath(source_fd_); }
std::string OpenedAs::mount_path() const { return FdPath(mount_fd_); }
std::string OpenedAs::mounted_path() const { return FdPath(mount_parent_fd_) + "/" + mount_leaf_; }

Status OpenedAs::CheckSourceApart() const {
  struct stat source {
  }, mount{};
  const bool same = ::fstat(source_fd_, &source) == 0 && ::fstat(mount_fd_, &mount) == 0 &&
                    source.st_dev == mount.st_dev && source.st_ino == mount.st_ino;
  if (same) {
    return Status::Error(EINVAL, fmt::format("SOURCE '{}' is MOUNTPOINT '{}' itself; mount the "
                                             "mirror elsewhere, or give SOURCE the dataset's "
                                             "directory",
                                             source_shown_, mount_shown_));
  }
  if (SourceWithin(source_shown_, mount_shown_)) {
    return Status::Error(EINVAL, fmt::format("SOURCE '{}' is inside MOUNTPOINT '{}': the mount "
                                             "would hide it; give SOURCE a directory outside the "
                                             "mount point",
                                             source_shown_, mount_shown_));
  }
  return Status::Ok();
}

Status OpenedAs::CheckMountpoint(bool allow_nonempty) const {
  const std::string named = fmt::format("MOUNTPOINT '{}'", mount_shown_);
  struct statx stx {};
  if (::statx(mount_fd_, "", AT_EMPTY_PATH, STATX_INO, &stx) != 0) {
    return Status::FromErrno(errno, named);
  }
  struct stat mount {
  }, parent{};
  ::fstat(mount_fd_, &mount);
  ::fstat(mount_parent_fd_, &parent);
  const bool mount_root = (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0
                              ? (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0
                              : mount.st_dev != parent.st_dev;
  if (mount_root) {
    return Status::Error(EBUSY, named + " is busy: something is already mounted there");
  }
  if (allow_nonempty) return Status::Ok();
  int fd = ::openat(mount_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (dir == nullptr) {
    Status why = Status::FromErrno(errno, named);
    if (fd >= 0) ::close(fd);
    return why;
  }
  if (!EmptyDirectory(dir)) {
    return Status::Error(ENOTEMPTY, named + " is not empty; mounting would hide its files");
  }
  return Status::Ok();
}

bool OpenedAs::Unmount(int fuse_fd) const {
  struct pollfd pfd = {fuse_fd, 0, 0};
  if (fuse_fd >= 0 && ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR) != 0) return true;
  return ::umount2(mounted_path().c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0;
}

Status OpenAs(uid_t uid, gid_t gid, const std::string& source, const std::string& mountpoint,
              OpenedAs* out, OpenAsFailure* failed) {
  *failed = OpenAsFailure::kMountpoint;
  std::string parent, leaf;
  SplitMountpoint(mountpoint, &parent, &leaf);
  if (leaf.empty()) {
    return Status::Error(EINVAL,
                         fmt::format("MOUNTPOINT '{}' has no name to mount on", mountpoint));
  }
  const std::string as = fmt::format("as uid {}", uid);
  {
    FsCredentials user(uid, gid, GroupsOf(uid, gid));
    if (!user.status().ok()) {
      *failed = OpenAsFailure::kCredentials;
      return user.status().Context("open_as= needs a root daemon");
    }
    out->source_fd_ = ::open(source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (out->source_fd_ < 0 || ::faccessat(out->source_fd_, ".", R_OK | X_OK, AT_EACCESS) != 0) {
      *failed = OpenAsFailure::kSource;
      return Status::FromErrno(errno, fmt::format("SOURCE '{}' cannot be read {}", source, as));
    }
    out->mount_parent_fd_ = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (out->mount_parent_fd_ < 0) {
      return Status::FromErrno(errno,
                               fmt::format("MOUNTPOINT '{}' cannot be reached {}", mountpoint, as));
    }
    struct stat st;
    if (::fstatat(out->mount_parent_fd_, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      return Status::Error(ELOOP, fmt::format("MOUNTPOINT '{}' is a symbolic link", mountpoint));
    }
    out->mount_fd_ = ::openat(out->mount_parent_fd_, leaf.c_str(),
                              O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (out->mount_fd_ < 0) {
      return Status::FromErrno(errno,
                               fmt::format("MOUNTPOINT '{}' cannot be reached {}", mountpoint, as));
    }
  }
  // The descriptors are reopened through /proc: it must be there.
  struct stat by_fd, by_proc;
  if (::fstat(out->source_fd_, &by_fd) != 0 || ::stat(out->source_path().c_str(), &by_proc) != 0 ||
      by_fd.st_ino != by_proc.st_ino || by_fd.st_dev != by_proc.st_dev) {
    *failed = OpenAsFailure::kCredentials;
    return Status::Error(ENOENT,
                         "open_as= needs /proc (the directories are used as "
                         "/proc/self/fd/N)");
  }
  out->mount_leaf_ = leaf;
  out->source_shown_ = Shown(out->source_fd_);
  out->mount_shown_ = Shown(out->mount_fd_);
  if (out->source_shown_.empty()) out->source_shown_ = source;
  if (out->mount_shown_.empty()) out->mount_shown_ = mountpoint;
  *failed = OpenAsFailure::kNone;
  return Status::Ok();
}

}  // namespace tierfs
