// Internal to tierfs_io: how PosixBackend opens SOURCE's paths, shared by
// posix_backend.cc (the backend: its files, directories and calls) and
// posix_backend_open.cc (opening beneath the root with no symlink on the way,
// the directories kept open, and a thread's file-system ids switched to a
// caller's). Not for other libraries.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/io/backend.h"

namespace tierfs {
namespace posix_backend_internal {

// A relative path as openat() wants it: "." for the root.
const char* AtPath(const std::string& rel);

// Opens `rel` strictly beneath `root_fd`, following no symbolic link in any
// component (a user may swap a directory of SOURCE for a symlink to /etc at
// any time: O_NOFOLLOW alone checks only the last component). openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (5.6+), else
// one openat(O_NOFOLLOW) per component. Returns the fd or -errno (a symlink
// on the way: -ELOOP).
int OpenBeneath(int root_fd, const std::string& rel, int flags);

// ImageNet's training set has 1,000 class directories; an eighth of the
// open-file limit at most (the SOURCE files kept open take half).
size_t KeptDirectories();

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
  size_t capacity() const { return capacity_; }

  struct Fd {
    explicit Fd(int f) : fd(f) {}
    ~Fd() { ::close(fd); }
    const int fd;
  };
  // The open directory `rel`, or -errno.
  int Get(int root_fd, const std::string& rel, std::shared_ptr<Fd>* out);
  void Drop(const std::string& rel);

 private:
  using Entry = std::pair<std::string, std::shared_ptr<Fd>>;
  const size_t capacity_;
  Mutex mu_;  // guards lru_ and index_; a leaf, no syscall under it
  std::list<Entry> lru_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<Entry>::iterator> index_ GUARDED_BY(mu_);
};

}  // namespace posix_backend_internal
}  // namespace tierfs
