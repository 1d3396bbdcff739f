// FileIo: every access of a directory tier and its journal to the local file
// system goes through this interface, as every SOURCE access goes through
// Backend, so a test can make a tier's device fail (ENOSPC, EIO) without a
// hand-written tier class (LevelDB's Env). Paths are absolute (or relative to
// the daemon's working directory), as given.
//
// One error shape: every method returns 0 (or a byte count) or -errno. None
// throws, none leaves errno meaningful for the caller; EINTR never escapes.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

// An open local file; closed by close() or by the destructor.
// Thread-safe: pread and write may be called concurrently (each write is one
// write(2): with O_APPEND, concurrent writes do not interleave their bytes).
// close() REQUIRES: no call in flight on this file.
class LocalFile {
 public:
  virtual ~LocalFile() = default;
  // Reads up to n bytes at offset off. Returns the byte count (short only at
  // EOF) or -errno.
  virtual ssize_t pread(void* buf, size_t n, uint64_t off) = 0;
  // One write(2) of up to n bytes at the file offset (at the end with
  // O_APPEND). Returns the byte count written (may be short) or -errno.
  virtual ssize_t write(const void* buf, size_t n) = 0;
  // One pwrite(2) of up to n bytes at offset off. Returns the byte count
  // written (may be short) or -errno.
  virtual ssize_t pwrite(const void* buf, size_t n, uint64_t off) = 0;
  // ftruncate(2) to `size` bytes (a hole where it grows). 0 or -errno.
  virtual int truncate(uint64_t size) = 0;
  // Frees [off, off+n) (fallocate PUNCH_HOLE, the size kept): reads there
  // give zeros. 0 or -errno (-EOPNOTSUPP: the file system cannot).
  virtual int punch_hole(uint64_t off, uint64_t n) = 0;
  // lseek(2) SEEK_HOLE: the offset of the first hole at or after `off` (the
  // file's size if there is none: a file system without holes says so), or
  // -errno (-ENXIO when `off` is at or past the end).
  virtual int64_t seek_hole(uint64_t off) = 0;
  virtual int fdatasync() = 0;
  // fstat(2).
  virtual int stat(struct stat* st) = 0;
  // Maps the first `size` bytes read-only (a private mapping that outlives
  // the file's close; unmapped when the last copy of *out goes). 0 or -errno.
  virtual int map(uint64_t size, std::shared_ptr<const unsigned char>* out) = 0;
  // Sets the file's times to now (a heartbeat others can see). 0 or -errno.
  virtual int touch() = 0;
  // Closes the file; 0 or -errno (a write error reported late). Later calls
  // return -EBADF.
  virtual int close() = 0;
};

// Forwards every call to a target file; subclasses override what they
// change (tests: faults, power cuts, rendezvous).
class LocalFileWrapper : public LocalFile {
 public:
  explicit LocalFileWrapper(std::unique_ptr<LocalFile> target) : target_(std::move(target)) {}
  ssize_t pread(void* buf, size_t n, uint64_t off) override { return target_->pread(buf, n, off); }
  ssize_t write(const void* buf, size_t n) override { return target_->write(buf, n); }
  ssize_t pwrite(const void* buf, size_t n, uint64_t off) override {
    return target_->pwrite(buf, n, off);
  }
  int truncate(uint64_t size) override { return target_->truncate(size); }
  int punch_hole(uint64_t off, uint64_t n) override { return target_->punch_hole(off, n); }
  int64_t seek_hole(uint64_t off) override { return target_->seek_hole(off); }
  int fdatasync() override { return target_->fdatasync(); }
  int stat(struct stat* st) override { return target_->stat(st); }
  int map(uint64_t size, std::shared_ptr<const unsigned char>* out) override {
    return target_->map(size, out);
  }
  int touch() override { return target_->touch(); }
  int close() override { return target_->close(); }

 protected:
  LocalFile* target() const { return target_.get(); }

 private:
  const std::unique_ptr<LocalFile> target_;
};

// Writes all n bytes with as many write() calls as it takes. 0 or -errno
// (-EIO if the file takes no more bytes without saying why).
int WriteAll(LocalFile* file, const char* data, size_t n);
// The same with pwrite at offset `off`.
int PwriteAll(LocalFile* file, const char* data, size_t n, uint64_t off);

// An exclusive advisory lock on a file, held until destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
  // Replaces the lock file's contents with `text` (who holds it), for
  // LockHolder to show another process. 0 or -errno.
  virtual int Note(std::string_view text) = 0;
};

// Whether another process holds the lock at `path` (flock, as
// FileIo::lock takes it). False if nobody does, the file does not exist or
// cannot be opened; else true, and *note is what the holder wrote with
// FileLock::Note (at most 512 bytes, anything unprintable as '?').
bool LockHolder(const std::string& path, std::string* note);

// Thread-safe: every method may be called concurrently.
class FileIo {
 public:
  virtual ~FileIo() = default;
  // open(2) with `flags` (O_CLOEXEC is always added) and `mode`.
  virtual int open(const std::string& path, int flags, mode_t mode,
                   std::unique_ptr<LocalFile>* out) = 0;
  virtual int rename(const std::string& from, const std::string& to) = 0;
  virtual int unlink(const std::string& path) = 0;
  // -EEXIST if `path` exists (whatever it is).
  virtual int mkdir(const std::string& path, mode_t mode) = 0;
  // chmod(2) of a directory or file; never follows a final symbolic link.
  virtual int chmod(const std::string& path, mode_t mode) = 0;
  // Names in a directory, without "." and "..", in no particular order.
  virtual int list(const std::string& dir, std::vector<std::string>* names) = 0;
  // stat(2): follows symbolic links.
  virtual int stat(const std::string& path, struct stat* st) = 0;
  // lstat(2): a final symbolic link is described, not followed.
  virtual int lstat(const std::string& path, struct stat* st) = 0;
  // access(2) with R_OK/W_OK/X_OK bits.
  virtual int access(const std::string& path, int mode) = 0;
  // fsync(2) of directory `dir`: the names made, renamed or removed in it
  // are durable once it returns.
  virtual int sync_dir(const std::string& dir) = 0;
  // Creates `path` if missing and locks it exclusively without waiting
  // (flock): -EWOULDBLOCK when another process (or another FileLock) holds it.
  virtual int lock(const std::string& path, std::unique_ptr<FileLock>* out) = 0;
};

// The local file system, through POSIX calls.
std::unique_ptr<FileIo> NewPosixFileIo();
// One shared PosixFileIo, for callers given none; it lives as long as the
// process (a raw pointer to it never dangles).
std::shared_ptr<FileIo> DefaultFileIo();

// Forwards every call to a target; subclasses override what they change.
class FileIoWrapper : public FileIo {
 public:
  explicit FileIoWrapper(std::shared_ptr<FileIo> target) : target_(std::move(target)) {}
  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    return target_->open(path, flags, mode, out);
  }
  int rename(const std::string& from, const std::string& to) override {
    return target_->rename(from, to);
  }
  int unlink(const std::string& path) override { return target_->unlink(path); }
  int mkdir(const std::string& path, mode_t mode) override { return target_->mkdir(path, mode); }
  int chmod(const std::string& path, mode_t mode) override { return target_->chmod(path, mode); }
  int list(const std::string& dir, std::vector<std::string>* names) override {
    return target_->list(dir, names);
  }
  int stat(const std::string& path, struct stat* st) override { return target_->stat(path, st); }
  int lstat(const std::string& path, struct stat* st) override { return target_->lstat(path, st); }
  int access(const std::string& path, int mode) override { return target_->access(path, mode); }
  int sync_dir(const std::string& dir) override { return target_->sync_dir(dir); }
  int lock(const std::string& path, std::unique_ptr<FileLock>* out) override {
    return target_->lock(path, out);
  }

 protected:
  FileIo* target() const { return target_.get(); }

 private:
  std::shared_ptr<FileIo> target_;
};

}  // namespace tierfs
