#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tiering/io/backend.h"
#include "tiering/io/posix_calls.h"

namespace tierfs {
namespace {

// A relative path as openat() wants it: "." for the root.
const char* AtPath(const std::string& rel) { return rel.empty() ? "." : rel.c_str(); }

// Opens `rel` strictly beneath `root_fd`, following no symbolic link in any
// component (a user may swap a directory of SOURCE for a symlink to /etc at
// any time: O_NOFOLLOW alone checks only the last component). openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (5.6+), else
// one openat(O_NOFOLLOW) per component. Returns the fd or -errno (a symlink
// on the way: -ELOOP).
int OpenBeneath(int root_fd, const std::string& rel, int flags) {
  static std::atomic<bool> no_openat2{false};
  if (!no_openat2.load(std::memory_order_relaxed)) {
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd;
    do {
      fd = ::syscall(SYS_openat2, root_fd, AtPath(rel), &how, sizeof how);
    } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS) return -errno;
    no_openat2.store(true, std::memory_order_relaxed);
  }
  if (rel.empty()) {
    int fd = ::openat(root_fd, ".", flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }
  int dir = root_fd;
  size_t start = 0;
  while (true) {
    size_t slash = rel.find('/', start);
    std::string part =
        rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") {
      if (dir != root_fd) ::close(dir);
      return -EXDEV;  // not a path the snapshot makes
    }
    const bool last = slash == std::string::npos;
    int fd = ::openat(dir, part.c_str(),
                      (last ? flags : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
    int err = fd < 0 ? -errno : 0;
    if (dir != root_fd) ::close(dir);
    if (err < 0) return err == -ENOTDIR && !last ? -ELOOP : err;
    if (last) return fd;
    dir = fd;
    start = slash + 1;
  }
}

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

// ImageNet's training set has 1,000 class directories; an eighth of the
// open-file limit at most (the SOURCE files kept open take half).
size_t KeptDirectories() {
  struct rlimit rl {};
  const uint64_t limit = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  return static_cast<size_t>(std::clamp<uint64_t>(limit / 8, 16, 4096));
}

// SOURCE's directories kept open (O_PATH), at most `capacity`, least
// recently used out first: opening a file then walks one component on
// SOURCE instead of its whole path. On a network or FUSE file system whose
// entries are not cached that is one LOOKUP round trip per file instead of
// one per path component. Each directory was opened beneath the root with
// no symlink on the way; a directory moved or replaced since keeps its fd,
// which names the directory itself, never what now sits at its path (a
// file found there is still checked against the snapshot), and a file
// missing from it is looked up from the root again.
class DirFdCache {
 public:
  explicit DirFdCache(size_t capacity) : capacity_(capacity) {}

  struct Fd {
    explicit Fd(int f) : fd(f) {}
    ~Fd() { ::close(fd); }
    const int fd;
  };
  // The open directory `rel`, or -errno.
  int Get(int root_fd, const std::string& rel, std::shared_ptr<Fd>* out) {
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(rel);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        *out = it->second->second;
        return 0;
      }
    }
    int fd = OpenBeneath(root_fd, rel, O_PATH | O_DIRECTORY);
    if (fd < 0) return fd;
    auto opened = std::make_shared<Fd>(fd);
    std::shared_ptr<Fd> evicted;  // closed after the lock is released
    std::lock_guard lock(mu_);
    auto it = index_.find(rel);
    if (it != index_.end()) {  // another thread opened it meanwhile: share theirs
      *out = it->second->second;
      return 0;
    }
    lru_.emplace_front(rel, opened);
    index_[rel] = lru_.begin();
    if (lru_.size() > capacity_) {
      evicted = std::move(lru_.back().second);
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    *out = std::move(opened);
    return 0;
  }
  void Drop(const std::string& rel) {
    std::shared_ptr<Fd> dropped;
    std::lock_guard lock(mu_);
    auto it = index_.find(rel);
    if (it == index_.end()) return;
    dropped = std::move(it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<Fd>>;
  const size_t capacity_;
  std::mutex mu_;  // guards lru_ and index_; a leaf, no syscall under it
  std::list<Entry> lru_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

class PosixBackend final : public Backend {
 public:
  explicit PosixBackend(int root_fd) : root_fd_(root_fd) {
    struct statfs fs {};
    constexpr decltype(fs.f_type) kFuseSuperMagic = 0x65735546;
    stable_inodes_ = !(::fstatfs(root_fd_, &fs) == 0 && fs.f_type == kFuseSuperMagic);
  }
  bool stable_inodes() const override { return stable_inodes_; }
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
  // ids set to the caller's (setfsuid, setfsgid, and the setgroups system
  // call, which unlike glibc's wrapper changes one thread only), so that
  // SOURCE's file system decides as it would for the caller: every
  // directory's search permission below the root, then faccessat2 with
  // AT_EACCESS on the file itself (mode bits, ACLs of any kind). Only a
  // root daemon with CAP_SETUID and CAP_SETGID can (else -ENOSYS); the ids
  // are restored before returning.
  int access_as(const std::string& rel, const AccessCaller& who, int mask) override {
    if (::geteuid() != 0) return -ENOSYS;
    ThreadIds as(who);
    if (!as.ok()) return -ENOSYS;  // root without CAP_SETUID/SETGID (drop_privileges)
    int fd = OpenBeneath(root_fd_, rel, O_PATH);
    if (fd < 0) return fd == -ELOOP ? -EACCES : fd;
    long r = ::syscall(SYS_faccessat2, fd, "", mask, AT_EMPTY_PATH | AT_EACCESS);
    int err = r == 0 ? 0 : PosixError();
    ::close(fd);
    return err;
  }

 private:
  // This thread's file-system ids switched to a caller's for its lifetime.
  class ThreadIds {
   public:
    explicit ThreadIds(const AccessCaller& who) {
      int n = ::getgroups(0, nullptr);
      saved_groups_.resize(n > 0 ? static_cast<size_t>(n) : 0);
      if (n > 0 && ::getgroups(n, saved_groups_.data()) != n) return;
      if (::syscall(SYS_setgroups, who.groups.size(), who.groups.data()) != 0) return;
      groups_set_ = true;
      saved_gid_ = static_cast<gid_t>(::setfsgid(who.gid));
      saved_uid_ = static_cast<uid_t>(::setfsuid(who.uid));
      ok_ = static_cast<uid_t>(::setfsuid(who.uid)) == who.uid &&
            static_cast<gid_t>(::setfsgid(who.gid)) == who.gid;
    }
    ~ThreadIds() {
      if (!groups_set_) return;
      ::setfsuid(saved_uid_);
      ::setfsgid(saved_gid_);
      if (::syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data()) != 0) {
        std::abort();  // this thread would go on with a caller's groups: nothing safe to do
      }
    }
    bool ok() const { return ok_; }

   private:
    std::vector<gid_t> saved_groups_;
    uid_t saved_uid_ = 0;
    gid_t saved_gid_ = 0;
    bool groups_set_ = false, ok_ = false;
  };

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
