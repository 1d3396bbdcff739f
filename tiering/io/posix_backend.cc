// The POSIX Backend over SOURCE (PosixBackend) and its files and directories;
// how it opens paths (beneath the root, the directories kept open, as a
// caller) is in posix_backend_open.cc, shared through
// posix_backend_internal.h.
#include <dirent.h>
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "tiering/io/backend.h"
#include "tiering/io/fs_credentials.h"
#include "tiering/io/posix_backend_internal.h"
#include "tiering/io/posix_calls.h"

namespace tierfs {
namespace {

using posix_backend_internal::AtPath;
using posix_backend_internal::DirFdCache;
using posix_backend_internal::KeptDirectories;
using posix_backend_internal::OpenBeneath;

class PosixFile final : public SourceFile {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }
  ssize_t pread(void* buf, size_t n, uint64_t off) override { return PreadFull(fd_, buf, n, off); }
  // The attributes the open has just fetched: AT_STATX_DONT_SYNC spares a
  // network or FUSE file system whose attributes expire at once (pfs-sim,
  // sshfs, s3fs) a GETATTR round trip per opened file; a local file system
  // ignores the flag, and NFS revalidates at open anyway.
  int fstat(struct stat* st) override {
    struct statx x {};
    if (::statx(fd_, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &x) != 0) {
      return PosixError();
    }
    *st = {};
    st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    st->st_ino = x.stx_ino;
    st->st_mode = x.stx_mode;
    st->st_nlink = x.stx_nlink;
    st->st_uid = x.stx_uid;
    st->st_gid = x.stx_gid;
    st->st_rdev = makedev(x.stx_rdev_major, x.stx_rdev_minor);
    st->st_size = static_cast<off_t>(x.stx_size);
    st->st_blksize = x.stx_blksize;
    st->st_blocks = static_cast<blkcnt_t>(x.stx_blocks);
    auto ts = [](const struct statx_timestamp& t) { return timespec{t.tv_sec, t.tv_nsec}; };
    st->st_atim = ts(x.stx_atime);
    st->st_mtim = ts(x.stx_mtime);
    st->st_ctim = ts(x.stx_ctime);
    return 0;
  }

 private:
  const int fd_;
};

// A directory read once (getdents); entries stat()ed relative to its fd.
class PosixDir final : public SourceDir {
 public:
  PosixDir(int fd, std::vector<std::string> names) : fd_(fd), names_(std::move(names)) {}
  ~PosixDir() override { ::close(fd_); }
  const std::vector<std::string>& names() const override { return names_; }
  int lstat(const std::string& name, struct stat* st) override {
    if (::fstatat(fd_, name.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) return PosixError();
    return 0;
  }

 private:
  const int fd_;
  const std::vector<std::string> names_;
};

// A directory served from one list(): the default Backend::open_dir.
class ListedDir final : public SourceDir {
 public:
  explicit ListedDir(std::vector<DirEntry> entries) : entries_(std::move(entries)) {
    std::sort(entries_.begin(), entries_.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (const auto& e : entries_) names_.push_back(e.name);
  }
  const std::vector<std::string>& names() const override { return names_; }
  int lstat(const std::string& name, struct stat* st) override {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                               [](const DirEntry& e, const std::string& n) { return e.name < n; });
    if (it == entries_.end() || it->name != name) return -ENOENT;
    *st = it->st;
    return 0;
  }

 private:
  std::vector<DirEntry> entries_;
  std::vector<std::string> names_;
};

class PosixBackend final : public Backend {
 public:
  explicit PosixBackend(int root_fd) : root_fd_(root_fd) {
    struct statfs fs {};
    constexpr decltype(fs.f_type) kFuseSuperMagic = 0x65735546;
    stable_inodes_ = !(::fstatfs(root_fd_, &fs) == 0 && fs.f_type == kFuseSuperMagic);
  }
  bool stable_inodes() const override { return stable_inodes_; }
  size_t kept_descriptors() const override { return dirs_.capacity(); }
  ~PosixBackend() override { ::close(root_fd_); }

  int stat(const std::string& rel, struct stat* st) override {
    return AtParent(rel, [&](int dir, const char* leaf) {
      return ::fstatat(dir, leaf, st, AT_SYMLINK_NOFOLLOW) != 0 ? PosixError() : 0;
    });
  }

  int list(const std::string& rel, std::vector<DirEntry>* out) override {
    std::unique_ptr<SourceDir> dir;
    if (int err = open_dir(rel, &dir); err < 0) return err;
    out->clear();
    for (const std::string& name : dir->names()) {
      DirEntry e;
      e.name = name;
      int err = dir->lstat(name, &e.st);
      if (err == -ENOENT) continue;  // removed while listing
      if (err < 0) return err;
      out->push_back(std::move(e));
    }
    return 0;
  }

  int open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) override {
    int fd = OpenBeneath(root_fd_, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return fd;
    int list_fd = ::dup(fd);  // closedir closes the one it reads
    DIR* dir = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
    if (dir == nullptr) {
      int err = PosixError();
      if (list_fd >= 0) ::close(list_fd);
      ::close(fd);
      return err;
    }
    std::vector<std::string> names;
    int err = 0;
    while (true) {
      errno = 0;
      struct dirent* de = ::readdir(dir);
      if (de == nullptr) {
        if (errno != 0) err = PosixError();
        break;
      }
      std::string_view name(de->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(dir);
    if (err < 0) {
      ::close(fd);
      return err;
    }
    *out = std::make_unique<PosixDir>(fd, std::move(names));
    return 0;
  }

  int readlink(const std::string& rel, std::string* target) override {
    char buf[PATH_MAX];
    ssize_t n = 0;
    if (int err = AtParent(rel,
                           [&](int dir, const char* leaf) {
                             n = ::readlinkat(dir, leaf, buf, sizeof(buf));
                             return n < 0 ? PosixError() : 0;
                           });
        err < 0) {
      return err;
    }
    if (static_cast<size_t>(n) == sizeof(buf)) return -ENAMETOOLONG;
    target->assign(buf, static_cast<size_t>(n));
    return 0;
  }

  int statfs(struct statvfs* out) override {
    if (::fstatvfs(root_fd_, out) != 0) return PosixError();
    return 0;
  }

  int open(const std::string& rel, std::unique_ptr<SourceFile>* out) override {
    int fd = -ENOENT;
    if (const size_t slash = rel.rfind('/'); slash != std::string::npos) {
      const std::string parent = rel.substr(0, slash);
      std::shared_ptr<DirFdCache::Fd> dir;
      if (dirs_.Get(root_fd_, parent, &dir) == 0) {
        fd = OpenBeneath(dir->fd, rel.substr(slash + 1), O_RDONLY);
        if (fd < 0 && fd != -ENOENT && fd != -ESTALE) return fd;
        // Gone from the directory kept open (replaced or removed): the
        // directory is not kept, and the path is walked from the root.
        if (fd < 0) dirs_.Drop(parent);
      }
    }
    // No parent, or the parent could not be kept open: from the root, which
    // also gives the precise error (a symlink on the way: ELOOP).
    if (fd < 0) fd = OpenBeneath(root_fd_, rel, O_RDONLY);
    if (fd < 0) return fd;
    out->reset(new PosixFile(fd));
    return 0;
  }

  // The path is walked and the file checked with this thread's file-system
  // credentials set to the caller's (FsCredentials), so that
  // SOURCE's file system decides as it would for the caller: every
  // directory's search permission below the root, then faccessat2 with
  // AT_EACCESS on the file itself (mode bits, ACLs of any kind). Only a
  // root daemon with CAP_SETUID and CAP_SETGID can (else -ENOSYS); the ids
  // are restored before returning.
  int access_as(const std::string& rel, const AccessCaller& who, int mask) override {
    if (::geteuid() != 0) return -ENOSYS;
    FsCredentials as(who.uid, who.gid, who.groups);
    if (!as.status().ok()) return -ENOSYS;  // root without CAP_SETUID/SETGID (drop_privileges)
    int fd = OpenBeneath(root_fd_, rel, O_PATH);
    if (fd < 0) return fd == -ELOOP ? -EACCES : fd;
    long r = ::syscall(SYS_faccessat2, fd, "", mask, AT_EMPTY_PATH | AT_EACCESS);
    int err = r == 0 ? 0 : PosixError();
    ::close(fd);
    return err;
  }

 private:
  // Runs `op(dir, leaf)` on rel's parent, opened beneath the root with no
  // symlink on the way (the leaf itself is the op's to follow or not).
  template <typename Op>
  int AtParent(const std::string& rel, Op op) {
    const size_t slash = rel.rfind('/');
    if (slash == std::string::npos) return op(root_fd_, AtPath(rel));
    int parent = OpenBeneath(root_fd_, rel.substr(0, slash), O_PATH | O_DIRECTORY);
    if (parent < 0) return parent;
    int err = op(parent, rel.c_str() + slash + 1);
    ::close(parent);
    return err;
  }

  const int root_fd_;  // opened once; all paths resolve below it
  bool stable_inodes_ = true;
  DirFdCache dirs_{KeptDirectories()};
};

}  // namespace

int Backend::access_as(const std::string&, const AccessCaller&, int) { return -ENOSYS; }

int Backend::open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) {
  std::vector<DirEntry> entries;
  if (int err = list(rel, &entries); err < 0) return err;
  *out = std::make_unique<ListedDir>(std::move(entries));
  return 0;
}

Result<std::unique_ptr<Backend>> NewPosixBackend(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(-PosixError(), "'" + root + "'");
  return std::unique_ptr<Backend>(std::make_unique<PosixBackend>(fd));
}

}  // namespace tierfs
