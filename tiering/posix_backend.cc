#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "tiering/backend.h"
#include "tiering/posix_calls.h"

namespace tierfs {
namespace {

// A relative path as openat() wants it: "." for the root.
const char* AtPath(const std::string& rel) { return rel.empty() ? "." : rel.c_str(); }

class PosixFile final : public SourceFile {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }
  ssize_t pread(void* buf, size_t n, uint64_t off) override { return PreadFull(fd_, buf, n, off); }

 private:
  const int fd_;
};

class PosixBackend final : public Backend {
 public:
  explicit PosixBackend(int root_fd) : root_fd_(root_fd) {}
  ~PosixBackend() override { ::close(root_fd_); }

  int stat(const std::string& rel, struct stat* st) override {
    if (::fstatat(root_fd_, AtPath(rel), st, AT_SYMLINK_NOFOLLOW) != 0) return PosixError();
    return 0;
  }

  int list(const std::string& rel, std::vector<DirEntry>* out) override {
    int fd = ::openat(root_fd_, AtPath(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return PosixError();
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      int err = PosixError();
      ::close(fd);
      return err;
    }
    out->clear();
    int err = ForEachEntry(dir, [&](const char* name) {
      DirEntry e;
      e.name = name;
      if (::fstatat(::dirfd(dir), name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
        return errno == ENOENT ? 0 : PosixError();  // ENOENT: removed while listing
      }
      out->push_back(std::move(e));
      return 0;
    });
    ::closedir(dir);
    return err;
  }

  int readlink(const std::string& rel, std::string* target) override {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(root_fd_, AtPath(rel), buf, sizeof(buf));
    if (n < 0) return PosixError();
    if (static_cast<size_t>(n) == sizeof(buf)) return -ENAMETOOLONG;
    target->assign(buf, static_cast<size_t>(n));
    return 0;
  }

  int statfs(struct statvfs* out) override {
    if (::fstatvfs(root_fd_, out) != 0) return PosixError();
    return 0;
  }

  int open(const std::string& rel, std::unique_ptr<SourceFile>* out) override {
    int fd = ::openat(root_fd_, AtPath(rel), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return PosixError();
    out->reset(new PosixFile(fd));
    return 0;
  }

 private:
  const int root_fd_;  // opened once; all paths resolve below it
};

}  // namespace

std::unique_ptr<Backend> NewPosixBackend(const std::string& root, int* err) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *err = PosixError();
    return nullptr;
  }
  *err = 0;
  return std::make_unique<PosixBackend>(fd);
}

}  // namespace tierfs
