// FaultFileIo: a FileIo for tests that forwards to a real one and injects
// faults, as FaultBackend does for SOURCE. A rule says: calls of operation K
// on a path containing a substring succeed N more times, then fail with
// -errno (a number of times, or always). A directory tier or journal opened
// over it meets a full device (ENOSPC) or a failing one (EIO) exactly where a
// test says.
//
// Thread-safe. Rules may change while calls are in flight; a file opened
// through this FileIo sees later rules. REQUIRES: it outlives the files it
// opened.
#pragma once

#include <array>
#include <cerrno>
#include <mutex>
#include <string>
#include <vector>

#include "tiering/io/file_io.h"

namespace tierfs::testing {

// kRead, kWrite (write and pwrite), kSync, kClose, kMap, kTouch, kTruncate,
// kPunch and kSeekHole act on a file and match the path it was opened under
// (so does kStat of an open file); kRename matches either name; kStat also
// stands for lstat.
enum class FileOp {
  kOpen,
  kRead,
  kWrite,
  kSync,
  kClose,
  kRename,
  kUnlink,
  kMkdir,
  kList,
  kStat,
  kAccess,
  kLock,
  kMap,
  kTouch,
  kTruncate,
  kPunch,
  kSeekHole
};
inline constexpr size_t kFileOpCount = 17;

class FaultFileIo final : public FileIoWrapper {
 public:
  static constexpr int kAlways = -1;

  explicit FaultFileIo(std::shared_ptr<FileIo> target) : FileIoWrapper(std::move(target)) {}

  // The next `after` calls of `op` on a path containing `path_part` go
  // through; the `times` calls after them (every one with kAlways) return
  // -err without reaching the target (a close is done, then reported failed).
  // When several rules match a call, the first one added decides.
  void Fail(FileOp op, std::string path_part, int err, int after = 0, int times = kAlways) {
    std::lock_guard lock(mu_);
    rules_.push_back(Rule{op, std::move(path_part), err, after, times});
  }
  // Removes every rule; the counts stay.
  void Heal() {
    std::lock_guard lock(mu_);
    rules_.clear();
  }

  // Calls of `op` so far (failed ones included), and calls that returned an
  // injected error: of `op`, or in all.
  uint64_t calls(FileOp op) const {
    std::lock_guard lock(mu_);
    return calls_[Index(op)];
  }
  uint64_t injected(FileOp op) const {
    std::lock_guard lock(mu_);
    return injected_[Index(op)];
  }
  uint64_t injected() const {
    std::lock_guard lock(mu_);
    uint64_t n = 0;
    for (uint64_t i : injected_) n += i;
    return n;
  }

  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    if (int err = Enter(FileOp::kOpen, path)) return err;
    std::unique_ptr<LocalFile> file;
    int r = target()->open(path, flags, mode, &file);
    if (r == 0) *out = std::make_unique<FaultFile>(this, path, std::move(file));
    return r;
  }
  int rename(const std::string& from, const std::string& to) override {
    if (int err = Enter(FileOp::kRename, from, to)) return err;
    return target()->rename(from, to);
  }
  int unlink(const std::string& path) override {
    if (int err = Enter(FileOp::kUnlink, path)) return err;
    return target()->unlink(path);
  }
  int mkdir(const std::string& path, mode_t mode) override {
    if (int err = Enter(FileOp::kMkdir, path)) return err;
    return target()->mkdir(path, mode);
  }
  int list(const std::string& dir, std::vector<std::string>* names) override {
    if (int err = Enter(FileOp::kList, dir)) return err;
    return target()->list(dir, names);
  }
  int stat(const std::string& path, struct stat* st) override {
    if (int err = Enter(FileOp::kStat, path)) return err;
    return target()->stat(path, st);
  }
  int lstat(const std::string& path, struct stat* st) override {
    if (int err = Enter(FileOp::kStat, path)) return err;
    return target()->lstat(path, st);
  }
  int access(const std::string& path, int mode) override {
    if (int err = Enter(FileOp::kAccess, path)) return err;
    return target()->access(path, mode);
  }
  int lock(const std::string& path, std::unique_ptr<FileLock>* out) override {
    if (int err = Enter(FileOp::kLock, path)) return err;
    return target()->lock(path, out);
  }

 private:
  class FaultFile final : public LocalFileWrapper {
   public:
    FaultFile(FaultFileIo* io, std::string path, std::unique_ptr<LocalFile> file)
        : LocalFileWrapper(std::move(file)), io_(io), path_(std::move(path)) {}
    ssize_t pread(void* buf, size_t n, uint64_t off) override {
      if (int err = io_->Enter(FileOp::kRead, path_)) return err;
      return target()->pread(buf, n, off);
    }
    ssize_t write(const void* buf, size_t n) override {
      if (int err = io_->Enter(FileOp::kWrite, path_)) return err;
      return target()->write(buf, n);
    }
    ssize_t pwrite(const void* buf, size_t n, uint64_t off) override {
      if (int err = io_->Enter(FileOp::kWrite, path_)) return err;
      return target()->pwrite(buf, n, off);
    }
    int truncate(uint64_t size) override {
      if (int err = io_->Enter(FileOp::kTruncate, path_)) return err;
      return target()->truncate(size);
    }
    int punch_hole(uint64_t off, uint64_t n) override {
      if (int err = io_->Enter(FileOp::kPunch, path_)) return err;
      return target()->punch_hole(off, n);
    }
    int64_t seek_hole(uint64_t off) override {
      if (int err = io_->Enter(FileOp::kSeekHole, path_)) return err;
      return target()->seek_hole(off);
    }
    int fdatasync() override {
      if (int err = io_->Enter(FileOp::kSync, path_)) return err;
      return target()->fdatasync();
    }
    int stat(struct stat* st) override {
      if (int err = io_->Enter(FileOp::kStat, path_)) return err;
      return target()->stat(st);
    }
    int map(uint64_t size, std::shared_ptr<const unsigned char>* out) override {
      if (int err = io_->Enter(FileOp::kMap, path_)) return err;
      return target()->map(size, out);
    }
    int touch() override {
      if (int err = io_->Enter(FileOp::kTouch, path_)) return err;
      return target()->touch();
    }
    int close() override {
      int err = io_->Enter(FileOp::kClose, path_);
      int r = target()->close();
      return err != 0 ? err : r;
    }

   private:
    FaultFileIo* const io_;
    const std::string path_;
  };

  struct Rule {
    FileOp op;
    std::string path_part;
    int err;
    int after;      // matching calls still to let through
    int remaining;  // kAlways, or calls left to fail
  };

  static size_t Index(FileOp op) { return static_cast<size_t>(op); }

  // Counts a call of `op` on `path` (or `other`) and returns the injected
  // -errno, or 0 to forward it.
  int Enter(FileOp op, const std::string& path, const std::string& other = "") {
    std::lock_guard lock(mu_);
    calls_[Index(op)]++;
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      bool matches = path.find(it->path_part) != std::string::npos ||
                     (!other.empty() && other.find(it->path_part) != std::string::npos);
      if (it->op != op || !matches) continue;
      if (it->after > 0) {
        it->after--;
        return 0;
      }
      int err = it->err;
      if (it->remaining != kAlways && --it->remaining == 0) rules_.erase(it);
      injected_[Index(op)]++;
      return -err;
    }
    return 0;
  }

  mutable std::mutex mu_;  // guards all below; a leaf lock, never held across I/O
  std::vector<Rule> rules_;
  std::array<uint64_t, kFileOpCount> calls_{};
  std::array<uint64_t, kFileOpCount> injected_{};
};

}  // namespace tierfs::testing
