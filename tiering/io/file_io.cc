// The POSIX FileIo: each method is one system call (or a readdir loop), its
// errno turned into -errno right after it, EINTR retried where it can occur.
#include "tiering/io/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "tiering/io/posix_calls.h"

namespace tierfs {
namespace {

// Calls `call` (a system call returning -1 and errno on failure) until it is
// not interrupted; returns its result (0 for most calls), or -errno.
template <typename Call>
auto Retrying(Call call) -> decltype(call()) {
  while (true) {
    auto r = call();
    if (r >= 0) return r;
    if (errno != EINTR) return PosixError();
  }
}

class PosixLocalFile final : public LocalFile {
 public:
  explicit PosixLocalFile(int fd) : fd_(fd) {}
  ~PosixLocalFile() override { close(); }

  ssize_t pread(void* buf, size_t n, uint64_t off) override {
    if (fd_ < 0) return -EBADF;
    return PreadFull(fd_, buf, n, off);
  }
  ssize_t write(const void* buf, size_t n) override {
    if (fd_ < 0) return -EBADF;
    return Retrying([&] { return ::write(fd_, buf, n); });
  }
  ssize_t pwrite(const void* buf, size_t n, uint64_t off) override {
    if (fd_ < 0) return -EBADF;
    return Retrying([&] { return ::pwrite(fd_, buf, n, static_cast<off_t>(off)); });
  }
  int truncate(uint64_t size) override {
    if (fd_ < 0) return -EBADF;
    return Retrying([&] { return ::ftruncate(fd_, static_cast<off_t>(size)); });
  }
  int punch_hole(uint64_t off, uint64_t n) override {
    if (fd_ < 0) return -EBADF;
    if (n == 0) return 0;
    return Retrying([&] {
      return ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                         static_cast<off_t>(n));
    });
  }
  int64_t seek_hole(uint64_t off) override {
    if (fd_ < 0) return -EBADF;
    const off_t r = ::lseek(fd_, static_cast<off_t>(off), SEEK_HOLE);
    return r < 0 ? PosixError() : static_cast<int64_t>(r);
  }
  int fdatasync() override {
    if (fd_ < 0) return -EBADF;
    return Retrying([&] { return ::fdatasync(fd_); });
  }
  int stat(struct stat* st) override {
    if (fd_ < 0) return -EBADF;
    return ::fstat(fd_, st) == 0 ? 0 : PosixError();
  }
  int map(uint64_t size, std::shared_ptr<const unsigned char>* out) override {
    if (fd_ < 0) return -EBADF;
    if (size == 0) return -EINVAL;
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) return PosixError();
    *out = {static_cast<const unsigned char*>(p),
            [size](const unsigned char* q) { ::munmap(const_cast<unsigned char*>(q), size); }};
    return 0;
  }
  int touch() override {
    if (fd_ < 0) return -EBADF;
    return ::futimens(fd_, nullptr) == 0 ? 0 : PosixError();
  }
  int close() override {
    if (fd_ < 0) return -EBADF;
    int r = ::close(fd_);
    fd_ = -1;
    // Linux releases the descriptor even when close() is interrupted: never retry.
    return r == 0 || errno == EINTR ? 0 : PosixError();
  }

 private:
  int fd_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // releases the flock

  int Note(std::string_view text) override {
    if (Retrying([&] { return ::ftruncate(fd_, 0); }) < 0) return PosixError();
    for (size_t done = 0; done < text.size();) {
      ssize_t n = ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? PosixError() : -EIO;
      done += static_cast<size_t>(n);
    }
    return 0;
  }

 private:
  const int fd_;
};

class PosixFileIo final : public FileIo {
 public:
  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    int fd = Retrying([&] { return ::open(path.c_str(), flags | O_CLOEXEC, mode); });
    if (fd < 0) return fd;
    *out = std::make_unique<PosixLocalFile>(fd);
    return 0;
  }
  int rename(const std::string& from, const std::string& to) override {
    return Retrying([&] { return ::rename(from.c_str(), to.c_str()); });
  }
  int unlink(const std::string& path) override {
    return Retrying([&] { return ::unlink(path.c_str()); });
  }
  int mkdir(const std::string& path, mode_t mode) override {
    return Retrying([&] { return ::mkdir(path.c_str(), mode); });
  }
  int chmod(const std::string& path, mode_t mode) override {
    return Retrying([&] { return ::fchmodat(AT_FDCWD, path.c_str(), mode, AT_SYMLINK_NOFOLLOW); });
  }
  int stat(const std::string& path, struct stat* st) override {
    return Retrying([&] { return ::stat(path.c_str(), st); });
  }
  int lstat(const std::string& path, struct stat* st) override {
    return Retrying([&] { return ::lstat(path.c_str(), st); });
  }
  int access(const std::string& path, int mode) override {
    return Retrying([&] { return ::access(path.c_str(), mode); });
  }

  int sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError();
    int err = Retrying([&] { return ::fsync(fd); });
    ::close(fd);
    return err;
  }

  int list(const std::string& dir, std::vector<std::string>* names) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError();
    names->clear();
    int err = ForEachEntry(d, [names](const char* name) {
      names->emplace_back(name);
      return 0;
    });
    ::closedir(d);
    return err;
  }

  int lock(const std::string& path, std::unique_ptr<FileLock>* out) override {
    int fd = Retrying(
        [&] { return ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600); });
    if (fd < 0) return fd;
    if (int err = Retrying([&] { return ::flock(fd, LOCK_EX | LOCK_NB); }); err < 0) {
      ::close(fd);
      return err;
    }
    *out = std::make_unique<PosixFileLock>(fd);
    return 0;
  }
};

}  // namespace

int WriteAll(LocalFile* file, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = file->write(data, n);
    if (w < 0) return static_cast<int>(w);
    if (w == 0) return -EIO;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int PwriteAll(LocalFile* file, const char* data, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t w = file->pwrite(data, n, off);
    if (w < 0) return static_cast<int>(w);
    if (w == 0) return -EIO;
    data += w;
    off += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
  return 0;
}

std::unique_ptr<FileIo> NewPosixFileIo() { return std::make_unique<PosixFileIo>(); }

std::shared_ptr<FileIo> DefaultFileIo() {
  static const std::shared_ptr<FileIo> io = NewPosixFileIo();
  return io;
}

bool LockHolder(const std::string& path, std::string* note) {
  note->clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  // A shared lock is refused only while an exclusive one is held.
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK) {
    ::close(fd);  // releases it at once
    return false;
  }
  char buf[512];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  ::close(fd);
  for (ssize_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(buf[i]);
    note->push_back(c == '\n' || (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?');
  }
  return true;
}

}  // namespace tierfs
