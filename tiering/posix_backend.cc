#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "tiering/backend.h"

namespace tierfs {
namespace {

int PosixError() { return -errno; }

// A relative path as openat() wants it: "." for the root.
const char* AtPath(const std::string& rel) { return rel.empty() ? "." : rel.c_str(); }

class PosixFile final : public SourceFile {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }
  ssize_t pread(void* buf, size_t n, uint64_t off) override {
    size_t done = 0;
    char* p = static_cast<char*>(buf);
    while (done < n) {
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return PosixError();
      }
      if (r == 0) break;  // EOF
      done += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(done);
  }

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
    int err = 0;
    while (true) {
      errno = 0;
      struct dirent* de = ::readdir(dir);
      if (de == nullptr) {
        if (errno != 0) err = PosixError();
        break;
      }
      std::string_view name(de->d_name);
      if (name == "." || name == "..") continue;
      DirEntry e;
      e.name.assign(name);
      if (::fstatat(::dirfd(dir), de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed while listing
        err = PosixError();
        break;
      }
      out->push_back(std::move(e));
    }
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
