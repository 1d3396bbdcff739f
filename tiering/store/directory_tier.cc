// The directory tier: one file per chunk under <path>/data, named c<seq>.
// Publication: write <name>.tmp, fdatasync, rename, then a journal line.
// Durability in batches: after every kSyncBatch publishes, or the first
// publish kSyncAge after the last batch, data/ and the journal are synced
// (fsync of the directory, fdatasync of the journal), so a power cut loses
// at most the chunks published since the last batch (kill -9 loses none);
// recovery never serves a wrong byte either way.
// Every file access goes through the tier's FileIo.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "tiering/base/log.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"
#include "tiering/store/tier_journal.h"

namespace tierfs {
namespace {

// The sequence number a chunk file's name "c<seq>" holds, written as the tier
// writes it (decimal, no leading zero, below TierJournal::kSeqLimit); nullopt
// for any other name (a .tmp, a stray file, a number that could wrap).
std::optional<uint64_t> SeqOfName(std::string_view name) {
  if (name.size() < 2 || name[0] != 'c' || name[1] == '0') return std::nullopt;
  uint64_t seq = 0;
  const char* end = name.data() + name.size();
  auto [stop, ec] = std::from_chars(name.data() + 1, end, seq);
  if (ec != std::errc() || stop != end || seq >= TierJournal::kSeqLimit) return std::nullopt;
  return seq;
}

// Deletes the journal of the tier at `path`, then every file in its data/.
// Best effort: what cannot be deleted is named by no journal record. Returns
// how many data files were deleted.
uint64_t EmptyTierDirectory(FileIo* io, const std::string& path) {
  io->unlink(path + "/journal");
  std::vector<std::string> names;
  io->list(path + "/data", &names);
  uint64_t removed = 0;
  for (const auto& name : names) removed += io->unlink(path + "/data/" + name) == 0;
  return removed;
}

class JournaledDirectoryTier final : public DirectoryTier {
 public:
  JournaledDirectoryTier(std::shared_ptr<FileIo> io, std::string name, std::string path,
                         uint64_t budget, std::unique_ptr<FileLock> lock)
      : DirectoryTier(std::move(name), Kind::kDirectory, budget),
        io_(std::move(io)),
        path_(std::move(path)),
        data_(path_ + "/data"),
        lock_(std::move(lock)),
        journal_(io_.get(), path_ + "/journal") {}

  const std::string& path() const override { return path_; }
  int NoteHolder(std::string_view text) override { return lock_ ? lock_->Note(text) : 0; }

  using DirectoryTier::Recover;
  int Recover(const std::string& source, const Acceptor& accept,
              std::vector<ChunkKey>* kept) override;
  int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                 std::unique_ptr<ChunkWriter>* out) override;
  int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) override;
  uint64_t Remove(ChunkKey key) override;
  int PinBacking(NodeId id, uint64_t size, uint64_t* token) override;
  int OpenBacking(NodeId id, uint64_t token) override;
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
    {
      std::unique_lock lock(mu_);
      index_[key] = Entry{seq, origin.length};
    }
    SyncBatchIfDue();
    CompactJournalIfLong();
    return 0;
  }
  // Syncs data/ and the journal now: the publishes so far survive a power cut.
  void SyncNow() {
    unsynced_.store(0, std::memory_order_relaxed);
    last_sync_ns_.store(NowNs(), std::memory_order_relaxed);
    int err = io_->sync_dir(data_);
    if (int j = journal_.Sync(); err == 0 && j != -EBADF) err = j;
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (err < 0) {
      TIERFS_LOG(kWarning, "tier {}: cannot sync its publishes: {}", path_, std::strerror(-err));
    }
  }
  ~JournaledDirectoryTier() override {
    if (unsynced_.load() > 0) SyncNow();
  }
  std::string FileOf(uint64_t seq) const { return fmt::format("{}/c{}", data_, seq); }
  FileIo* io() const { return io_.get(); }

 private:
  struct Entry {
    uint64_t seq;
    uint64_t length;
  };
  // Where chunk `key` is, if stored.
  std::optional<Entry> Find(ChunkKey key) const {
    std::shared_lock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  // Recovery failed with `err`: forget and delete everything, take nothing more.
  int GiveUp(const char* what, int err);
  static constexpr uint64_t kSyncBatch = 64;
  static constexpr int64_t kSyncAgeNs = 1'000'000'000;
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // One publisher at a time syncs, when a batch is full or old.
  void SyncBatchIfDue() {
    uint64_t n = unsynced_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n < kSyncBatch && NowNs() - last_sync_ns_.load(std::memory_order_relaxed) < kSyncAgeNs) {
      return;
    }
    if (syncing_.exchange(true)) return;
    SyncNow();
    syncing_.store(false);
  }
  // Rewrites the journal with the live chunks' records once it holds more
  // than twice as many lines as there are chunks (and at least
  // kCompactAfter): eviction churn must not grow it without bound.
  void CompactJournalIfLong();
  static constexpr uint64_t kCompactAfter = 4096;

  const std::shared_ptr<FileIo> io_;
  const std::string path_, data_;
  const std::unique_ptr<FileLock> lock_;  // one daemon per tier directory
  TierJournal journal_;
  std::string source_;  // the SOURCE identity; set by Recover, before any other use
  std::atomic<bool> compacting_{false};
  std::atomic<uint64_t> unsynced_{0};  // publishes since the last sync
  std::atomic<int64_t> last_sync_ns_{NowNs()};
  std::atomic<bool> syncing_{false};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> next_seq_{1};
  mutable std::shared_mutex mu_;  // guards index_; a leaf lock, never held across I/O
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index_;
};

// Not thread-safe: one promotion writes through it.
class DirWriter final : public ChunkWriter {
 public:
  DirWriter(JournaledDirectoryTier* tier, ChunkKey key, ChunkOrigin origin, uint64_t seq,
            std::unique_ptr<LocalFile> file)
      : tier_(tier), key_(key), origin_(std::move(origin)), seq_(seq), file_(std::move(file)) {}
  ~DirWriter() override { Abort(); }

  int Append(const char* data, size_t n) override {
    if (!file_) return failed_;
    if (int err = WriteAll(file_.get(), data, n); err < 0) {
      Abort();  // the file holds an unknown part of the bytes
      return failed_ = err;
    }
    written_ += n;
    return 0;
  }

  int Commit() override {
    if (!file_) return failed_;
    int err = written_ == origin_.length ? 0 : -EIO;
    if (err == 0) err = file_->fdatasync();  // data durable before its name
    if (int closed = file_->close(); err == 0) err = closed;
    file_.reset();
    const std::string final_name = tier_->FileOf(seq_);
    if (err == 0 && (err = tier_->io()->rename(Tmp(), final_name)) < 0) {
      tier_->io()->unlink(final_name);  // in case the rename happened after all
    }
    if (err < 0) {
      Abort();
      return failed_ = err;
    }
    done_ = true;
    return tier_->Publish(key_, seq_, origin_);
  }

  void Abort() override {
    if (done_) return;
    file_.reset();  // closes
    tier_->io()->unlink(Tmp());
    done_ = true;  // nothing left to undo
  }

 private:
  std::string Tmp() const { return tier_->FileOf(seq_) + ".tmp"; }
  JournaledDirectoryTier* const tier_;
  const ChunkKey key_;
  const ChunkOrigin origin_;
  const uint64_t seq_;
  std::unique_ptr<LocalFile> file_;  // null once committed or aborted
  uint64_t written_ = 0;
  bool done_ = false;    // committed or aborted
  int failed_ = -EBADF;  // what Append and Commit return once file_ is gone
};

int JournaledDirectoryTier::Recover(const std::string& source, const Acceptor& accept,
                                    std::vector<ChunkKey>* keys) {
  keys->clear();
  source_ = source;
  std::map<uint64_t, ChunkOrigin> recorded;
  bool foreign = false;
  if (int err = journal_.Load(source_, &recorded, &foreign); err < 0) {
    TIERFS_LOG(kWarning, "tier {}: cannot read its journal ({}): nothing is reused", path_,
               std::strerror(-err));
  } else if (foreign) {
    TIERFS_LOG(kWarning,
               "tier {}: its journal is of another SOURCE or an older tierfs: its copies are "
               "removed, none is reused (this SOURCE: {})",
               path_, source_);
  }
  // No new chunk may take a number that a record or a file already has.
  uint64_t max_seq = recorded.empty() ? 0 : recorded.rbegin()->first;
  std::vector<std::string> names;
  if (int err = io_->list(data_, &names); err < 0) return GiveUp("cannot list data/", err);
  std::map<uint64_t, ChunkOrigin> kept;
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index;
  uint64_t removed = 0;
  for (const auto& name : names) {
    std::optional<uint64_t> seq = SeqOfName(name);
    if (seq) max_seq = std::max(max_seq, *seq);
    auto it = seq ? recorded.find(*seq) : recorded.end();
    struct stat st;
    std::optional<ChunkKey> key;
    if (it != recorded.end() && io_->stat(data_ + "/" + name, &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == it->second.length) {
      key = accept(it->second);
    }
    if (key && !index.count(*key) && Reserve(it->second.length)) {
      index[*key] = Entry{*seq, it->second.length};
      kept[*seq] = it->second;
      keys->push_back(*key);
    } else {
      // Stale, incomplete, unknown, a second copy, or over budget.
      removed += io_->unlink(data_ + "/" + name) == 0;
    }
  }
  next_seq_ = max_seq + 1;  // max_seq < kSeqLimit: no wrap
  {
    std::unique_lock lock(mu_);
    index_ = std::move(index);
  }
  if (int err = journal_.Rewrite(source_, kept); err < 0) {
    keys->clear();
    return GiveUp("cannot rewrite its journal", err);
  }
  TIERFS_LOG(kInfo, "tier {} ({}): reused {} chunks ({} bytes), removed {} files", name(), path_,
             keys->size(), used(), removed);
  return 0;
}

void JournaledDirectoryTier::CompactJournalIfLong() {
  const uint64_t live = chunks();
  if (journal_.records() <= std::max(kCompactAfter, 2 * live)) return;
  if (compacting_.exchange(true)) return;  // another thread is at it
  std::unordered_set<uint64_t> seqs;
  uint64_t newer;  // chunks published from here on are kept whatever the snapshot says
  {
    std::shared_lock lock(mu_);
    newer = next_seq_.load();
    for (const auto& [key, entry] : index_) seqs.insert(entry.seq);
  }
  int err =
      journal_.Compact(source_, [&](uint64_t seq) { return seq >= newer || seqs.count(seq); });
  if (err < 0) {
    TIERFS_LOG(kWarning, "tier {}: cannot compact its journal: {}", path_, std::strerror(-err));
  }
  compacting_ = false;
}

int JournaledDirectoryTier::GiveUp(const char* what, int err) {
  {
    std::unique_lock lock(mu_);
    index_.clear();
  }
  uint64_t removed = EmptyTierDirectory(io_.get(), path_);
  Release(used());
  MarkFull();  // limit 0: no promotion comes here this mount
  TIERFS_LOG(kError, "tier {} ({}): {}: {}; removed {} files, unused until the next mount", name(),
             path_, what, std::strerror(-err), removed);
  return err;
}

int JournaledDirectoryTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                                       std::unique_ptr<ChunkWriter>* out) {
  uint64_t seq = next_seq_.fetch_add(1);
  std::unique_ptr<LocalFile> file;
  int err = io_->open(FileOf(seq) + ".tmp", O_WRONLY | O_CREAT | O_EXCL, 0600, &file);
  if (err < 0) return err;
  *out = std::make_unique<DirWriter>(this, key, origin, seq, std::move(file));
  return 0;
}

int JournaledDirectoryTier::Read(ChunkKey key, uint64_t off, size_t n, char* scratch,
                                 TierRead* out) {
  std::optional<Entry> e = Find(key);
  if (!e) return -ENOENT;
  const uint64_t seq = e->seq, length = e->length;
  std::unique_ptr<LocalFile> file;
  // Removed meanwhile: -ENOENT, and the caller falls back to SOURCE.
  if (int err = io_->open(FileOf(seq), O_RDONLY, 0, &file); err < 0) return err;
  size_t want = off >= length ? 0 : std::min<uint64_t>(n, length - off);
  ssize_t got = file->pread(scratch, want, off);
  if (got < 0) return static_cast<int>(got);
  if (static_cast<size_t>(got) < want) return -EIO;  // a copy shorter than recorded is damaged
  out->data = scratch;
  out->size = want;
  return 0;
}

// A chunk file holds the chunk's bytes at offsets 0..length, no header:
// the backing file of a file of one chunk, named by its sequence number.
// Remove unlinks the file, never rewrites it, so a pin needs no count: a
// descriptor handed out keeps the bytes.
int JournaledDirectoryTier::PinBacking(NodeId id, uint64_t size, uint64_t* token) {
  std::optional<Entry> e = Find(ChunkKey{id, 0});
  if (!e) return -ENOENT;
  if (e->length != size) return -EOPNOTSUPP;  // one chunk of several
  *token = e->seq;
  return 0;
}

// Opened directly, not through FileIo: the kernel needs a real descriptor.
int JournaledDirectoryTier::OpenBacking(NodeId id, uint64_t token) {
  std::optional<Entry> e = Find(ChunkKey{id, 0});
  if (!e || e->seq != token) return -ENOENT;
  const uint64_t length = e->length;
  int fd = ::open(FileOf(e->seq).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;  // removed meanwhile: -ENOENT
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != length) {
    ::close(fd);
    return -EIO;  // not the copy recorded
  }
  return fd;
}

uint64_t JournaledDirectoryTier::Remove(ChunkKey key) {
  Entry e;
  {
    std::unique_lock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return 0;
    e = it->second;
    index_.erase(it);
  }
  journal_.AppendRemove(e.seq);
  io_->unlink(FileOf(e.seq));  // readers with the file open finish their read
  CompactJournalIfLong();
  NoteRemoved(key.node);
  return e.length;
}

}  // namespace

std::vector<ChunkKey> DirectoryTier::Recover(const Acceptor& accept) {
  std::vector<ChunkKey> kept;
  Recover(std::string(), accept, &kept);
  return kept;
}

namespace {

// Why `path` cannot be this daemon's tier (ok if it can). A root daemon must
// not serve bytes another user planted, nor write where another user points
// it: the tier is a real directory (not a symlink) owned by the daemon's euid
// and writable by no one else, and every directory above it is owned by root
// or the euid and writable by others only with the sticky bit (as /tmp), so
// no one else can rename the tier away and put theirs in its place.
Status UnsafeTierDirectory(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // "link/" would follow link
  const uid_t me = ::geteuid();
  auto unsafe = [](std::string why) { return Status::Error(EACCES, std::move(why)); };
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Error(errno, std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return Status::Error(ELOOP, "it is a symbolic link");
  if (st.st_uid != me)
    return unsafe(fmt::format("it is owned by uid {}, not by this daemon's uid {}", st.st_uid, me));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return unsafe(fmt::format("group or others may write to it (mode {:o})", st.st_mode & 07777));
  std::error_code ec;
  std::filesystem::path dir =
      std::filesystem::canonical(std::filesystem::absolute(path).parent_path(), ec);
  if (ec) return Status::Error(ec.value(), fmt::format("its parent directory: {}", ec.message()));
  for (;; dir = dir.parent_path()) {
    if (::lstat(dir.c_str(), &st) != 0)
      return Status::FromErrno(errno, fmt::format("'{}'", dir.string()));
    if (st.st_uid != 0 && st.st_uid != me)
      return unsafe(fmt::format("'{}' above it is owned by uid {}", dir.string(), st.st_uid));
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
      return unsafe(
          fmt::format("'{}' above it is writable by others without the sticky bit (mode {:o})",
                      dir.string(), st.st_mode & 07777));
    if (dir == dir.root_path()) return Status::Ok();
  }
}

}  // namespace

Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(std::shared_ptr<FileIo> io,
                                                         std::string name, const std::string& given,
                                                         uint64_t budget, bool reset,
                                                         std::chrono::milliseconds lock_wait) {
  // Every later access is by this path, after the daemon has changed its
  // working directory to / (daemonizing): a relative one must not follow.
  std::error_code ec;
  const std::string path = std::filesystem::absolute(given, ec).lexically_normal().string();
  if (ec || path.empty()) {
    return Status::Error(
        ec ? ec.value() : EINVAL,
        fmt::format("tier '{}': cannot make it absolute: {}", given, ec.message()));
  }
  struct stat st;
  if (int err = io->stat(path, &st); err != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Error(err < 0 ? -err : ENOTDIR,
                         fmt::format("tier '{}': not an existing directory", path));
  }
  if (Status why = UnsafeTierDirectory(path); !why.ok()) {
    return why.Context(fmt::format("tier '{}' is refused", path));
  }
  if (int err = io->access(path, W_OK | X_OK); err < 0) {
    return Status::FromErrno(-err, fmt::format("tier '{}': not writable", path));
  }
  std::unique_ptr<FileLock> lock;
  const auto give_up = std::chrono::steady_clock::now() + lock_wait;
  int err = io->lock(path + "/lock", &lock);
  if (err == -EWOULDBLOCK && lock_wait.count() > 0) {
    TIERFS_LOG(kInfo, "tier '{}' is in use by another tierfs daemon: waiting up to {} s", path,
               lock_wait.count() / 1000.0);
    while (err == -EWOULDBLOCK && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      err = io->lock(path + "/lock", &lock);
    }
  }
  if (err == -EWOULDBLOCK) {
    return Status::Error(EBUSY, fmt::format("tier '{}' is in use by another tierfs daemon", path));
  }
  if (err < 0) {
    return Status::FromErrno(-err, fmt::format("tier '{}': cannot create its lock file", path));
  }
  // Replaced by the mount's pid and mount point once it serves (TieredStore).
  lock->Note(fmt::format("pid={}\nstate=starting\n", ::getpid()));
  if (reset) EmptyTierDirectory(io.get(), path);
  // data/ is the daemon's alone, whatever the umask: in a directory others
  // may write to, they could swap a chunk file for theirs.
  const std::string data = path + "/data";
  err = io->mkdir(data, 0700);
  if (err == -EEXIST) {
    struct stat dst;
    if (::lstat(data.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode) || dst.st_uid != ::geteuid()) {
      return Status::Error(
          EACCES, fmt::format("tier '{}': data/ is not a directory of this daemon's uid", path));
    }
    err = 0;
    if ((dst.st_mode & 077) != 0) {  // an older tierfs made it with the umask's mode
      const uint64_t removed = EmptyTierDirectory(io.get(), path);
      TIERFS_LOG(kWarning, "tier '{}': data/ was open to others (mode {:o}): {} copies removed",
                 path, dst.st_mode & 07777, removed);
      err = io->chmod(data, 0700);
    }
  }
  if (err < 0) return Status::FromErrno(-err, fmt::format("tier '{}': cannot create data/", path));
  return std::unique_ptr<DirectoryTier>(std::make_unique<JournaledDirectoryTier>(
      std::move(io), std::move(name), path, budget, std::move(lock)));
}

Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(std::string name, const std::string& path,
                                                         uint64_t budget, bool reset,
                                                         std::chrono::milliseconds lock_wait) {
  return OpenDirectoryTier(NewPosixFileIo(), std::move(name), path, budget, reset, lock_wait);
}

}  // namespace tierfs
