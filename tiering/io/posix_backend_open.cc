// Where PosixBackend opens SOURCE's paths: beneath the root with no symlink
// on the way (OpenBeneath) and through the directories it keeps open
// (DirFdCache). The backend itself is in posix_backend.cc;
// what both share in posix_backend_internal.h.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "tiering/io/posix_backend_internal.h"

namespace tierfs {
namespace posix_backend_internal {

const char* AtPath(const std::string& rel) { return rel.empty() ? "." : rel.c_str(); }

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

size_t KeptDirectories() {
  struct rlimit rl {};
  const uint64_t limit = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  return static_cast<size_t>(std::clamp<uint64_t>(limit / 8, 16, 4096));
}

int DirFdCache::Get(int root_fd, const std::string& rel, std::shared_ptr<Fd>* out) {
  {
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
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

void DirFdCache::Drop(const std::string& rel) {
  std::shared_ptr<Fd> dropped;
  MutexLock lock(mu_);
  auto it = index_.find(rel);
  if (it == index_.end()) return;
  dropped = std::move(it->second->second);
  lru_.erase(it->second);
  index_.erase(it);
}

}  // namespace posix_backend_internal
}  // namespace tierfs
