// The directory tier: one file per chunk under <path>/data, named c<seq>.
// Publication: write <name>.tmp, fdatasync, rename, then a journal line.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "tiering/log.h"
#include "tiering/tier.h"
#include "tiering/tier_journal.h"

namespace tierfs {
namespace {

class DirTier final : public DirectoryTier {
 public:
  DirTier(std::string name, std::string path, uint64_t budget, int lock_fd)
      : DirectoryTier(std::move(name), Kind::kDirectory, budget),
        path_(std::move(path)),
        data_(path_ + "/data"),
        lock_fd_(lock_fd) {}
  ~DirTier() override { ::close(lock_fd_); }

  const std::string& path() const override { return path_; }

  std::vector<ChunkKey> Recover(const Acceptor& accept) override;
  std::unique_ptr<ChunkWriter> BeginStore(ChunkKey key, const ChunkOrigin& origin,
                                          int* err) override;
  int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) override;
  uint64_t Remove(ChunkKey key) override;
  size_t chunks() const override {
    std::shared_lock lock(mu_);
    return index_.size();
  }

  // Called by a writer after its rename. The chunk is served from now on; if
  // the journal cannot record it, a restart will not reuse (only remove) it.
  int Publish(ChunkKey key, uint64_t seq, const ChunkOrigin& origin) {
    if (int err = journal_.AppendPublish(seq, origin); err < 0) {
      TIERFS_LOG(kWarning, "tier {}: journal write failed: {}", path_, std::strerror(-err));
    }
    std::unique_lock lock(mu_);
    index_[key] = Entry{seq, origin.length};
    return 0;
  }
  std::string FileOf(uint64_t seq) const { return fmt::format("{}/c{}", data_, seq); }

 private:
  struct Entry {
    uint64_t seq;
    uint64_t length;
  };
  const std::string path_, data_;
  const int lock_fd_;  // flock()ed: one daemon per tier directory
  TierJournal journal_;
  std::atomic<uint64_t> next_seq_{1};
  mutable std::shared_mutex mu_;  // guards index_; a leaf lock, never held across I/O
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index_;
  friend class DirWriter;
};

class DirWriter final : public ChunkWriter {
 public:
  DirWriter(DirTier* tier, ChunkKey key, ChunkOrigin origin, uint64_t seq, int fd)
      : tier_(tier), key_(key), origin_(std::move(origin)), seq_(seq), fd_(fd) {}
  ~DirWriter() override { Abort(); }

  int Append(const char* data, size_t n) override {
    if (fd_ < 0) return -EBADF;
    while (n > 0) {
      ssize_t w = ::write(fd_, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return -errno;
      }
      data += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    return 0;
  }

  int Commit() override {
    if (fd_ < 0) return -EBADF;
    int err = 0;
    if (written_ != origin_.length) err = -EIO;
    if (err == 0 && ::fdatasync(fd_) != 0) err = -errno;  // data durable before its name
    ::close(fd_);
    fd_ = -1;
    std::string final_name = tier_->FileOf(seq_);
    if (err == 0 && ::rename(Tmp().c_str(), final_name.c_str()) != 0) err = -errno;
    if (err < 0) {
      ::unlink(Tmp().c_str());
      return err;
    }
    committed_ = true;
    return tier_->Publish(key_, seq_, origin_);
  }

  void Abort() override {
    if (committed_) return;
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    ::unlink(Tmp().c_str());
    committed_ = true;  // nothing left to undo
  }

 private:
  std::string Tmp() const { return tier_->FileOf(seq_) + ".tmp"; }
  DirTier* const tier_;
  const ChunkKey key_;
  const ChunkOrigin origin_;
  const uint64_t seq_;
  int fd_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

std::vector<ChunkKey> DirTier::Recover(const Acceptor& accept) {
  std::string journal_path = path_ + "/journal";
  std::map<uint64_t, ChunkOrigin> recorded = TierJournal::Load(journal_path);
  std::map<uint64_t, ChunkOrigin> kept;
  std::vector<ChunkKey> keys;
  uint64_t max_seq = 0, removed = 0;
  DIR* dir = ::opendir(data_.c_str());
  while (dir != nullptr) {
    struct dirent* de = ::readdir(dir);
    if (de == nullptr) break;
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    uint64_t seq = 0;
    bool ours = name.size() > 1 && name[0] == 'c' &&
                name.find_first_not_of("0123456789", 1) == std::string::npos;
    if (ours) seq = std::strtoull(name.c_str() + 1, nullptr, 10);
    max_seq = std::max(max_seq, seq);
    auto it = ours ? recorded.find(seq) : recorded.end();
    struct stat st;
    std::optional<ChunkKey> key;
    if (it != recorded.end() && ::stat(FileOf(seq).c_str(), &st) == 0 &&
        static_cast<uint64_t>(st.st_size) == it->second.length) {
      key = accept(it->second);
    }
    if (key && Reserve(it->second.length)) {
      index_[*key] = Entry{seq, it->second.length};
      kept[seq] = it->second;
      keys.push_back(*key);
    } else {
      ::unlink((data_ + "/" + name).c_str());  // stale, incomplete, unknown or over budget
      removed++;
    }
  }
  if (dir != nullptr) ::closedir(dir);
  next_seq_ = max_seq + 1;
  if (int err = journal_.Rewrite(journal_path, kept); err < 0) {
    TIERFS_LOG(kError, "tier {}: cannot write its journal: {}", path_, std::strerror(-err));
  }
  TIERFS_LOG(kInfo, "tier {} ({}): reused {} chunks ({} bytes), removed {} files", name(), path_,
             keys.size(), used(), removed);
  return keys;
}

std::unique_ptr<ChunkWriter> DirTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                                                 int* err) {
  uint64_t seq = next_seq_.fetch_add(1);
  std::string tmp = FileOf(seq) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = -errno;
    return nullptr;
  }
  *err = 0;
  return std::make_unique<DirWriter>(this, key, origin, seq, fd);
}

int DirTier::Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) {
  uint64_t seq, length;
  {
    std::shared_lock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return -ENOENT;
    seq = it->second.seq;
    length = it->second.length;
  }
  int fd = ::open(FileOf(seq).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;  // removed meanwhile: the caller falls back to SOURCE
  size_t want = off >= length ? 0 : std::min<uint64_t>(n, length - off);
  size_t done = 0;
  int err = 0;
  while (done < want) {
    ssize_t r = ::pread(fd, scratch + done, want - done, static_cast<off_t>(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      err = r < 0 ? -errno : -EIO;  // a copy shorter than recorded is damaged
      break;
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  if (err < 0) return err;
  out->data = scratch;
  out->size = done;
  return 0;
}

uint64_t DirTier::Remove(ChunkKey key) {
  Entry e;
  {
    std::unique_lock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return 0;
    e = it->second;
    index_.erase(it);
  }
  journal_.AppendRemove(e.seq);
  ::unlink(FileOf(e.seq).c_str());  // readers with the file open finish their read
  return e.length;
}

}  // namespace

namespace {

// Why `path` cannot be this daemon's tier ("" if it can). A root daemon must
// not serve bytes another user planted, nor write where another user points
// it: the tier is a real directory (not a symlink) owned by the daemon's euid
// and writable by no one else, and every directory above it is owned by root
// or the euid and writable by others only with the sticky bit (as /tmp), so
// no one else can rename the tier away and put theirs in its place.
std::string UnsafeTierDirectory(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // "link/" would follow link
  const uid_t me = ::geteuid();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (st.st_uid != me)
    return fmt::format("it is owned by uid {}, not by this daemon's uid {}", st.st_uid, me);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("group or others may write to it (mode {:o})", st.st_mode & 07777);
  std::error_code ec;
  std::filesystem::path dir =
      std::filesystem::canonical(std::filesystem::absolute(path).parent_path(), ec);
  if (ec) return fmt::format("its parent directory: {}", ec.message());
  for (;; dir = dir.parent_path()) {
    if (::lstat(dir.c_str(), &st) != 0)
      return fmt::format("'{}': {}", dir.string(), std::strerror(errno));
    if (st.st_uid != 0 && st.st_uid != me)
      return fmt::format("'{}' above it is owned by uid {}", dir.string(), st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
      return fmt::format("'{}' above it is writable by others without the sticky bit (mode {:o})",
                         dir.string(), st.st_mode & 07777);
    if (dir == dir.root_path()) return "";
  }
}

}  // namespace

std::unique_ptr<DirectoryTier> OpenDirectoryTier(std::string name, const std::string& path,
                                                 uint64_t budget, bool reset, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    *error = fmt::format("tier '{}': not an existing directory", path);
    return nullptr;
  }
  if (std::string why = UnsafeTierDirectory(path); !why.empty()) {
    *error = fmt::format("tier '{}' is refused: {}", path, why);
    return nullptr;
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    *error = fmt::format("tier '{}': not writable: {}", path, std::strerror(errno));
    return nullptr;
  }
  int lock_fd = ::open((path + "/lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    *error = fmt::format("tier '{}': cannot create its lock file: {}", path, std::strerror(errno));
    return nullptr;
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    *error = fmt::format("tier '{}' is in use by another tierfs daemon", path);
    return nullptr;
  }
  if (reset) {
    fs::remove_all(path + "/data", ec);
    fs::remove(path + "/journal", ec);
  }
  fs::create_directory(path + "/data", ec);
  if (ec) {
    ::close(lock_fd);
    *error = fmt::format("tier '{}': cannot create data/: {}", path, ec.message());
    return nullptr;
  }
  return std::make_unique<DirTier>(std::move(name), path, budget, lock_fd);
}

}  // namespace tierfs
