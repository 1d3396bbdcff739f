// ControlDir: the hidden `.tierfs/` directory at the mount root, through which
// the daemon is observed (and later steered). It is not listed by readdir of
// the root but can be looked up by name.
//
// `.tierfs/stats` is a JSON snapshot. Opens cost no request (zero-message
// open), so a snapshot cannot be taken at open: instead every lookup of
// `stats` creates a fresh inode holding a fresh snapshot, whose size is exact
// and whose bytes never change; the kernel's FORGET frees it. Each `cat` thus
// reads one consistent, current snapshot through the page cache.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

class ControlDir {
 public:
  static constexpr std::string_view kName = ".tierfs";
  static constexpr size_t kMaxSnapshots = 1024;  // oldest dropped beyond this

  // Inode numbers from `dir_ino` upward belong to the control directory.
  // `stats` produces the JSON text; it is called without any lock of ours.
  ControlDir(uint64_t dir_ino, uid_t owner, gid_t group, std::function<std::string()> stats);

  bool Owns(uint64_t ino) const { return ino >= dir_ino_; }
  uint64_t dir_ino() const { return dir_ino_; }

  // Attributes of the directory itself.
  void DirAttr(struct stat* st) const;
  // Looks up `name` in the directory: 0 and *st filled, or -ENOENT.
  int Lookup(std::string_view name, struct stat* st);
  // Attributes of a control inode: 0, or -ENOENT for an unknown one.
  int GetAttr(uint64_t ino, struct stat* st) const;
  // The bytes of snapshot `ino` in [off, off+size). *hold keeps them alive
  // while the caller replies. Returns 0, -EISDIR or -EIO (a dropped snapshot).
  int Read(uint64_t ino, uint64_t off, size_t size, std::string_view* out,
           std::shared_ptr<const std::string>* hold) const;
  // The kernel forgot `nlookup` lookups of `ino`.
  void Forget(uint64_t ino, uint64_t nlookup);
  // Names listed by readdir of the directory.
  static std::vector<std::string_view> Entries() { return {"stats"}; }

  size_t live_snapshots() const;

 private:
  struct Snapshot {
    std::shared_ptr<const std::string> text;
    uint64_t lookups = 0;
  };
  void FileAttr(uint64_t ino, size_t size, struct stat* st) const;

  const uint64_t dir_ino_;
  const uid_t owner_;
  const gid_t group_;
  const int64_t created_s_;
  const std::function<std::string()> stats_;
  mutable std::mutex mu_;  // guards snapshots_ and next_ino_; a leaf lock
  std::map<uint64_t, Snapshot> snapshots_;
  uint64_t next_ino_;
};

}  // namespace tierfs
