// ControlDir: the hidden `.tierfs/` directory at the mount root, through which
// the daemon is observed and steered. It is not listed by readdir of the
// root but can be looked up by name.
//
// Opens cost no request (zero-message open), so a file's content cannot be
// taken at open: instead every lookup of a control file creates a fresh
// inode holding a fresh snapshot of its content, with an exact size; the
// bytes of that inode never change and the kernel's FORGET frees it. Each
// `cat` thus reads one consistent, current snapshot through the page cache.
// Writes (and truncation) go to the file's handler whichever inode they hit.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "tiering/base/mutex.h"

namespace tierfs {

// One file of the control directory.
struct ControlFile {
  std::string name;
  // Its content now as `reader` (a uid, or ControlDir::kListing for a
  // directory listing) sees it; called without our lock. Each lookup makes
  // its own snapshot, so content made for one user reaches only her.
  std::function<std::string(uid_t reader)> read;
  // Bytes written by `writer` (its thread id, and who it is) at `off`: the
  // count accepted or -errno. Null for a read-only file.
  std::function<ssize_t(const HintWriter& writer, uint64_t off, std::string_view data)> write;
  std::function<void()> truncate;  // O_TRUNC; null = nothing to do
  // Read by root and the owner only (mode 0400): for anyone else, and for
  // a listing, its content is not even made (`read` is not called).
  bool private_read = false;
  // Written by anyone (mode 0666), not only by root and the owner: each
  // write acts as its writer (HintWriter), who is checked by the handler.
  bool public_write = false;
};

class ControlDir {
 public:
  static constexpr std::string_view kName = ".tierfs";
  static constexpr size_t kMaxSnapshots = 1024;  // oldest dropped beyond this

  // Inode numbers from `dir_ino` upward belong to the control directory.
  ControlDir(uint64_t dir_ino, uid_t owner, gid_t group, std::vector<ControlFile> files);

  bool Owns(uint64_t ino) const { return ino >= dir_ino_; }
  uint64_t dir_ino() const { return dir_ino_; }
  uid_t owner() const { return owner_; }

  // Attributes of the directory itself.
  void DirAttr(struct stat* st) const;
  // Looks up `name` in the directory: 0 and *st filled, or -ENOENT.
  // `caller` (a uid) is who asked; kListing for a directory listing: a
  // private_read file's content is made only for root and the owner.
  static constexpr uid_t kListing = static_cast<uid_t>(-1);
  int Lookup(std::string_view name, uid_t caller, struct stat* st);
  // Whether `caller` may read control inode `ino` (a private_read file:
  // root and the owner only) or write it (root and the owner, anyone for
  // a public_write file).
  bool MayRead(uint64_t ino, uid_t caller) const;
  bool MayWrite(uint64_t ino, uid_t caller) const;
  // Attributes of a control inode: 0, or -ENOENT for an unknown one.
  int GetAttr(uint64_t ino, struct stat* st) const;
  // The bytes of snapshot `ino` in [off, off+size). *hold keeps them alive
  // while the caller replies. Returns 0, -EISDIR or -EIO (a dropped snapshot).
  int Read(uint64_t ino, uint64_t off, size_t size, std::string_view* out,
           std::shared_ptr<const std::string>* hold) const;
  // A write to control inode `ino`: bytes accepted or -errno (-EACCES for a
  // read-only file, -EIO for an unknown inode).
  ssize_t Write(uint64_t ino, const HintWriter& writer, uint64_t off, std::string_view data);
  // Truncation to 0 of control inode `ino`: 0 or -errno.
  int Truncate(uint64_t ino);
  // The kernel forgot `nlookup` lookups of `ino`.
  void Forget(uint64_t ino, uint64_t nlookup);
  // Names listed by readdir of the directory.
  std::vector<std::string_view> Entries() const;

  // Snapshots held for open readers (at most kMaxSnapshots): reported
  // as `control_snapshots`.
  size_t held_snapshots() const;

 private:
  struct Snapshot {
    size_t file;  // index into files_
    std::shared_ptr<const std::string> text;
    uint64_t lookups = 0;
  };
  void FileAttr(uint64_t ino, const ControlFile& file, size_t size, struct stat* st) const;
  // The file an inode was handed out for (its snapshot may be gone), or nullptr.
  const ControlFile* FileOf(uint64_t ino) const;
  const ControlFile* FileOfLocked(uint64_t ino) const REQUIRES(mu_);

  const uint64_t dir_ino_;
  const uid_t owner_;
  const gid_t group_;
  const int64_t created_s_;
  const std::vector<ControlFile> files_;
  mutable Mutex mu_;  // guards snapshots_ and next_serial_; a leaf lock
  std::map<uint64_t, Snapshot> snapshots_ GUARDED_BY(mu_);
  uint64_t next_serial_ GUARDED_BY(mu_) =
      0;  // lookups so far: inode = dir_ino_ + 1 + serial * files + file
};

}  // namespace tierfs
