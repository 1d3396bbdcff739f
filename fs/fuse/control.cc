#include "fs/fuse/control.h"

#include <cerrno>
#include <ctime>

namespace tierfs {

ControlDir::ControlDir(uint64_t dir_ino, uid_t owner, gid_t group, std::vector<ControlFile> files)
    : dir_ino_(dir_ino),
      owner_(owner),
      group_(group),
      created_s_(::time(nullptr)),
      files_(std::move(files)) {}

void ControlDir::DirAttr(struct stat* st) const {
  *st = {};
  st->st_ino = dir_ino_;
  st->st_mode = S_IFDIR | 0555;
  st->st_nlink = 2;
  st->st_uid = owner_;
  st->st_gid = group_;
  st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec = created_s_;
}

void ControlDir::FileAttr(uint64_t ino, const ControlFile& file, size_t size,
                          struct stat* st) const {
  *st = {};
  st->st_ino = ino;
  // Only the owner (or root) may steer or read a private file; the kernel
  // checks these bits (default_permissions), the handlers check again.
  st->st_mode = S_IFREG | (file.private_read ? 0400 : 0444) |
                (!file.write         ? 0
                 : file.public_write ? 0222
                                     : 0200);
  st->st_nlink = 1;
  st->st_uid = owner_;
  st->st_gid = group_;
  st->st_size = static_cast<off_t>(size);
  st->st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
  st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec = ::time(nullptr);
}

int ControlDir::Lookup(std::string_view name, uid_t caller, struct stat* st) {
  size_t index = 0;
  while (index < files_.size() && files_[index].name != name) ++index;
  if (index == files_.size()) return -ENOENT;
  const bool make = !files_[index].private_read || caller == 0 || caller == owner_;
  auto text =
      std::make_shared<const std::string>(make ? files_[index].read(caller) : std::string());
  MutexLock lock(mu_);
  // The inode number says which file it is, so that writes reach the file
  // even after its snapshot was dropped (others' lookups beyond the cap).
  const uint64_t ino = dir_ino_ + 1 + next_serial_++ * files_.size() + index;
  snapshots_[ino] = Snapshot{index, text, 1};
  if (snapshots_.size() > kMaxSnapshots) snapshots_.erase(snapshots_.begin());
  FileAttr(ino, files_[index], text->size(), st);
  return 0;
}

int ControlDir::GetAttr(uint64_t ino, struct stat* st) const {
  if (ino == dir_ino_) {
    DirAttr(st);
    return 0;
  }
  MutexLock lock(mu_);
  auto it = snapshots_.find(ino);
  if (it != snapshots_.end()) {
    FileAttr(ino, files_[it->second.file], it->second.text->size(), st);
    return 0;
  }
  const ControlFile* file = FileOfLocked(ino);
  if (file == nullptr || !file->write) return -ENOENT;  // a read-only snapshot that was dropped
  FileAttr(ino, *file, 0, st);  // a writable file stays usable: its writes go to the handler
  return 0;
}

int ControlDir::Read(uint64_t ino, uint64_t off, size_t size, std::string_view* out,
                     std::shared_ptr<const std::string>* hold) const {
  if (ino == dir_ino_) return -EISDIR;
  {
    MutexLock lock(mu_);
    auto it = snapshots_.find(ino);
    if (it == snapshots_.end()) return -EIO;
    *hold = it->second.text;
  }
  std::string_view all(**hold);
  *out = off >= all.size() ? std::string_view() : all.substr(off, size);
  return 0;
}

const ControlFile* ControlDir::FileOfLocked(uint64_t ino) const {
  if (ino <= dir_ino_ || files_.empty()) return nullptr;
  const uint64_t n = ino - dir_ino_ - 1;
  if (n / files_.size() >= next_serial_) return nullptr;  // never handed out
  return &files_[n % files_.size()];
}

const ControlFile* ControlDir::FileOf(uint64_t ino) const {
  MutexLock lock(mu_);
  return FileOfLocked(ino);
}

bool ControlDir::MayRead(uint64_t ino, uid_t caller) const {
  if (caller == 0 || caller == owner_) return true;
  const ControlFile* file = FileOf(ino);
  return file == nullptr || !file->private_read;  // an unknown inode fails as such
}

bool ControlDir::MayWrite(uint64_t ino, uid_t caller) const {
  if (caller == 0 || caller == owner_) return true;
  const ControlFile* file = FileOf(ino);
  return file != nullptr && file->public_write;
}

ssize_t ControlDir::Write(uint64_t ino, const HintWriter& writer, uint64_t off,
                          std::string_view data) {
  if (ino == dir_ino_) return -EISDIR;
  const ControlFile* file = FileOf(ino);
  if (file == nullptr) return -EIO;
  if (!file->write) return -EACCES;
  return file->write(writer, off, data);
}

int ControlDir::Truncate(uint64_t ino) {
  if (ino == dir_ino_) return -EISDIR;
  const ControlFile* file = FileOf(ino);
  if (file == nullptr) return -EIO;
  if (!file->write) return -EACCES;
  if (file->truncate) file->truncate();
  return 0;
}

void ControlDir::Forget(uint64_t ino, uint64_t nlookup) {
  MutexLock lock(mu_);
  auto it = snapshots_.find(ino);
  if (it == snapshots_.end()) return;
  if (it->second.lookups <= nlookup) {
    snapshots_.erase(it);
  } else {
    it->second.lookups -= nlookup;
  }
}

std::vector<std::string_view> ControlDir::Entries() const {
  std::vector<std::string_view> names;
  for (const auto& f : files_) names.push_back(f.name);
  return names;
}

size_t ControlDir::held_snapshots() const {
  MutexLock lock(mu_);
  return snapshots_.size();
}

}  // namespace tierfs
