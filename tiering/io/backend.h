// The backend: every access to SOURCE (the dataset directory on the PFS) goes
// through this interface, so tests can substitute a slow or failing one
// (LevelDB's Env). Errors are returned as -errno, never thrown.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

// One entry of a SOURCE directory, with its lstat() attributes.
struct DirEntry {
  std::string name;
  struct stat st;
};

// An open SOURCE file.
// Thread-safe: pread may be called concurrently from many threads.
class SourceFile {
 public:
  virtual ~SourceFile() = default;
  // Reads up to n bytes at offset off. Returns the byte count (short only at
  // EOF) or -errno.
  virtual ssize_t pread(void* buf, size_t n, uint64_t off) = 0;
  // The open file's attributes (to check it is the file the snapshot
  // describes). 0 or -errno.
  virtual int fstat(struct stat* st) = 0;
};

// An open SOURCE directory, for a scan that lstat()s its entries in
// parallel. Thread-safe: lstat may be called concurrently.
class SourceDir {
 public:
  virtual ~SourceDir() = default;
  // The entries' names (without "." and ".."), in no particular order.
  virtual const std::vector<std::string>& names() const = 0;
  // lstat() of entry `name` of this directory (no path walk from the root).
  virtual int lstat(const std::string& name, struct stat* st) = 0;
};

// A caller's identity as the kernel gave it to the daemon, for access_as.
struct AccessCaller {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
  // False when the caller's supplementary groups could not be read (groups
  // is then empty): whatever a group of hers decides must refuse her.
  bool groups_known = true;
  bool operator==(const AccessCaller&) const = default;
};

// Paths are relative to SOURCE's root; "" names the root itself.
// Thread-safe: every method may be called concurrently.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int stat(const std::string& rel, struct stat* st) = 0;
  // Lists a directory (without "." and ".."), each entry lstat()ed.
  virtual int list(const std::string& rel, std::vector<DirEntry>* out) = 0;
  virtual int readlink(const std::string& rel, std::string* target) = 0;
  virtual int statfs(struct statvfs* out) = 0;
  // Opens a regular file for reading.
  virtual int open(const std::string& rel, std::unique_ptr<SourceFile>* out) = 0;
  // Reads a directory's names (one listing); its entries are lstat()ed on
  // demand. The default lists through list() and serves lstat from that
  // listing, so a wrapper that only overrides list() is honoured.
  virtual int open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out);
  // Whether SOURCE lets `who` do `mask` (R_OK, X_OK, ...) on `rel`, as
  // SOURCE's file system decides it for that caller: mode bits, POSIX or
  // NFSv4 ACLs, and search permission on every directory from the root
  // down. 0, -EACCES, another -errno, or -ENOSYS where the backend cannot
  // ask as another user (the default; a daemon that is not root).
  virtual int access_as(const std::string& rel, const AccessCaller& who, int mask);
  // Whether SOURCE keeps a file's inode number for as long as the file
  // lives. Not on FUSE file systems (sshfs, rclone, s3fs, gcsfuse: node ids
  // renumbered when the kernel forgets an inode): there a file is known by
  // its size, mtime and ctime only.
  virtual bool stable_inodes() const { return true; }
  // Descriptors it may keep open between calls at most (SOURCE's
  // directories), besides the files it opens for its callers.
  virtual size_t kept_descriptors() const { return 0; }
};

// A backend over a local (or PFS-mounted) directory. Fails with the errno
// when `root` cannot be opened as a directory ("'root': strerror").
Result<std::unique_ptr<Backend>> NewPosixBackend(const std::string& root);

// Forwards every call to a target; subclasses override what they change.
class BackendWrapper : public Backend {
 public:
  explicit BackendWrapper(std::shared_ptr<Backend> target) : target_(std::move(target)) {}
  int stat(const std::string& rel, struct stat* st) override { return target_->stat(rel, st); }
  int list(const std::string& rel, std::vector<DirEntry>* out) override {
    return target_->list(rel, out);
  }
  int readlink(const std::string& rel, std::string* target) override {
    return target_->readlink(rel, target);
  }
  int statfs(struct statvfs* out) override { return target_->statfs(out); }
  int open(const std::string& rel, std::unique_ptr<SourceFile>* out) override {
    return target_->open(rel, out);
  }
  int access_as(const std::string& rel, const AccessCaller& who, int mask) override {
    return target_->access_as(rel, who, mask);
  }
  bool stable_inodes() const override { return target_->stable_inodes(); }

 protected:
  Backend* target() const { return target_.get(); }

 private:
  std::shared_ptr<Backend> target_;
};

}  // namespace tierfs
