#include "fs/control.h"

#include <cerrno>
#include <ctime>

namespace tierfs {

ControlDir::ControlDir(uint64_t dir_ino, uid_t owner, gid_t group,
                       std::function<std::string()> stats)
    : dir_ino_(dir_ino),
      owner_(owner),
      group_(group),
      created_s_(::time(nullptr)),
      stats_(std::move(stats)),
      next_ino_(dir_ino + 1) {}

void ControlDir::DirAttr(struct stat* st) const {
  *st = {};
  st->st_ino = dir_ino_;
  st->st_mode = S_IFDIR | 0555;
  st->st_nlink = 2;
  st->st_uid = owner_;
  st->st_gid = group_;
  st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec = created_s_;
}

void ControlDir::FileAttr(uint64_t ino, size_t size, struct stat* st) const {
  *st = {};
  st->st_ino = ino;
  st->st_mode = S_IFREG | 0444;
  st->st_nlink = 1;
  st->st_uid = owner_;
  st->st_gid = group_;
  st->st_size = static_cast<off_t>(size);
  st->st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
  st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec = ::time(nullptr);
}

int ControlDir::Lookup(std::string_view name, struct stat* st) {
  if (name != "stats") return -ENOENT;
  auto text = std::make_shared<const std::string>(stats_());
  std::lock_guard lock(mu_);
  uint64_t ino = next_ino_++;
  snapshots_[ino] = Snapshot{text, 1};
  if (snapshots_.size() > kMaxSnapshots) snapshots_.erase(snapshots_.begin());
  FileAttr(ino, text->size(), st);
  return 0;
}

int ControlDir::GetAttr(uint64_t ino, struct stat* st) const {
  if (ino == dir_ino_) {
    DirAttr(st);
    return 0;
  }
  std::lock_guard lock(mu_);
  auto it = snapshots_.find(ino);
  if (it == snapshots_.end()) return -ENOENT;
  FileAttr(ino, it->second.text->size(), st);
  return 0;
}

int ControlDir::Read(uint64_t ino, uint64_t off, size_t size, std::string_view* out,
                     std::shared_ptr<const std::string>* hold) const {
  if (ino == dir_ino_) return -EISDIR;
  {
    std::lock_guard lock(mu_);
    auto it = snapshots_.find(ino);
    if (it == snapshots_.end()) return -EIO;
    *hold = it->second.text;
  }
  std::string_view all(**hold);
  *out = off >= all.size() ? std::string_view() : all.substr(off, size);
  return 0;
}

void ControlDir::Forget(uint64_t ino, uint64_t nlookup) {
  std::lock_guard lock(mu_);
  auto it = snapshots_.find(ino);
  if (it == snapshots_.end()) return;
  if (it->second.lookups <= nlookup) {
    snapshots_.erase(it);
  } else {
    it->second.lookups -= nlookup;
  }
}

size_t ControlDir::live_snapshots() const {
  std::lock_guard lock(mu_);
  return snapshots_.size();
}

}  // namespace tierfs
