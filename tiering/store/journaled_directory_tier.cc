// The directory tier's chunks: storing, reading, removing, and the backing
// files of FUSE passthrough (journaled_directory_tier.h).
#include "tiering/store/journaled_directory_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/base/mutex.h"

namespace tierfs::directory_tier {

std::optional<uint64_t> SeqOfName(std::string_view name) {
  if (name.size() < 2 || name[0] != 'f' || name[1] == '0') return std::nullopt;
  uint64_t seq = 0;
  const char* end = name.data() + name.size();
  auto [stop, ec] = std::from_chars(name.data() + 1, end, seq);
  if (ec != std::errc() || stop != end || seq >= TierJournal::kSeqLimit) return std::nullopt;
  return seq;
}

uint64_t EmptyTierDirectory(FileIo* io, const std::string& path) {
  io->unlink(path + "/journal");
  std::vector<std::string> names;
  io->list(path + "/data", &names);
  uint64_t removed = 0;
  for (const auto& name : names) removed += io->unlink(path + "/data/" + name) == 0;
  return removed;
}

void TierFile::Free(uint64_t offset, uint64_t length) {
  std::unique_ptr<LocalFile> file;
  int err = io->open(path, O_WRONLY, 0, &file);
  if (err == 0) err = file->punch_hole(offset, length);
  // Not freed: the bytes stay on the device (never served: their chunk left
  // the index first) until the file is unlinked or a restart punches them.
  if (err < 0 && err != -ENOENT) {
    TIERFS_LOG(kWarning, "tier file {}: cannot free bytes {}..{}: {}", path, offset,
               offset + length, std::strerror(-err));
  }
}

namespace {

using End = JournaledDirectoryTier::End;
using Entry = JournaledDirectoryTier::Entry;

// Writes one chunk's range of its tier file. Not thread-safe: one promotion
// writes through it.
class DirWriter final : public ChunkWriter {
 public:
  DirWriter(JournaledDirectoryTier* tier, ChunkKey key, ChunkOrigin origin, Entry entry,
            std::unique_ptr<LocalFile> file)
      : tier_(tier),
        key_(key),
        origin_(std::move(origin)),
        entry_(std::move(entry)),
        file_(std::move(file)) {}
  ~DirWriter() override { Abort(); }

  int Append(const char* data, size_t n) override {
    if (!file_) return failed_;
    wrote_ = true;
    int err = n > entry_.length - written_ ? -EOVERFLOW : 0;  // more than was reserved
    if (err == 0) err = PwriteAll(file_.get(), data, n, entry_.offset + written_);
    if (err < 0) {
      Abort();  // the range holds an unknown part of the bytes
      return failed_ = err;
    }
    written_ += n;
    return 0;
  }

  int Commit() override {
    if (!file_) return failed_;
    int err = written_ == entry_.length ? 0 : -EIO;
    if (err == 0) err = file_->fdatasync();  // the bytes durable before their record
    if (int closed = file_->close(); err == 0) err = closed;
    file_.reset();
    if (err < 0) {
      Abort();
      return failed_ = err;
    }
    done_ = true;
    tier_->Finish(key_, origin_, entry_, End::kPublished);
    return 0;
  }

  void Abort() override {
    if (done_) return;
    file_.reset();  // closes
    done_ = true;   // nothing left to undo
    tier_->Finish(key_, origin_, entry_, wrote_ ? End::kFailed : End::kUnwritten);
  }

 private:
  JournaledDirectoryTier* const tier_;
  const ChunkKey key_;
  const ChunkOrigin origin_;
  const Entry entry_;
  std::unique_ptr<LocalFile> file_;  // null once committed or aborted
  uint64_t written_ = 0;
  bool wrote_ = false;   // a write was tried: the range may hold some bytes
  bool done_ = false;    // committed or aborted
  int failed_ = -EBADF;  // what Append and Commit return once file_ is gone
};

}  // namespace

int JournaledDirectoryTier::TakeFile(NodeId id, uint64_t size, std::shared_ptr<TierFile>* out) {
  {
    WriterMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it != files_.end()) {
      if (it->second->size != size) return -ESTALE;  // another version of the file: never
      ++it->second->writers;
      *out = it->second;
      return 0;
    }
  }
  const uint64_t seq = NextSeq();
  auto made = std::make_shared<TierFile>(io_.get(), PathOf(seq), seq, size);
  std::unique_ptr<LocalFile> file;
  int err = io_->open(made->path, O_WRONLY | O_CREAT | O_EXCL, 0600, &file);
  if (err < 0) return err;
  err = file->truncate(size);
  if (int closed = file->close(); err == 0) err = closed;
  bool mine = false;
  if (err == 0) {
    WriterMutexLock lock(mu_);
    auto [it, fresh] = files_.try_emplace(id, made);
    mine = fresh;
    if (it->second->size != size) {
      err = -ESTALE;
    } else {
      ++it->second->writers;
      *out = it->second;
    }
  }
  if (!mine) io_->unlink(made->path);  // failed, or another writer made one first
  return err;
}

int JournaledDirectoryTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                                       std::unique_ptr<ChunkWriter>* out) {
  if (origin.offset > origin.file_size || origin.length > origin.file_size - origin.offset) {
    return -EINVAL;  // not a range of the file
  }
  Entry entry{nullptr, 0, 0, origin.offset, origin.length};  // its record: at publication
  if (int err = TakeFile(key.node, origin.file_size, &entry.file); err < 0) return err;
  std::unique_ptr<LocalFile> file;
  if (int err = io_->open(entry.file->path, O_WRONLY, 0, &file); err < 0) {
    Finish(key, origin, entry, End::kUnwritten);
    return err;
  }
  entry.gen = entry.file->Take(key.chunk);
  *out = std::make_unique<DirWriter>(this, key, origin, entry, std::move(file));
  return 0;
}

void JournaledDirectoryTier::Finish(ChunkKey key, const ChunkOrigin& origin, Entry entry, End end) {
  std::shared_ptr<TierFile> gone;
  std::optional<uint64_t> replaced;  // the record of a copy this one replaces
  {
    WriterMutexLock lock(mu_);
    --entry.file->writers;
    if (end == End::kPublished) {
      // Numbered and indexed at once: a compaction's snapshot of the index
      // holds this record, or was taken before the number existed (it keeps
      // every newer one), so the record line appended below survives it.
      entry.record = NextSeq();
      auto [it, fresh] = index_.try_emplace(key, entry);
      if (!fresh) {  // stored again over itself: the same range, now this writer's
        replaced = it->second.record;
        it->second.file->resident -= it->second.length;
        --it->second.file->chunks;
        it->second = entry;
      }
      entry.file->resident += entry.length;
      ++entry.file->chunks;
    }
    auto f = files_.find(key.node);
    if (f != files_.end() && f->second == entry.file) gone = DropIfEmpty(f);
  }
  if (gone) {
    Unlink(*gone);  // nothing in it: no punch needed
  } else if (end == End::kFailed) {
    entry.file->LetGo(key.chunk, entry.gen, entry.offset, entry.length);
  }
  if (end != End::kPublished) return;
  // After the bytes' fdatasync (the writer's Commit). Served from now on; a
  // Remove meanwhile may append its "R" first, and a restart then finds the
  // range punched (a hole: dropped) or still the chunk's bytes.
  if (int err = journal_.AppendPublish(entry.record, {entry.file->seq, origin}); err < 0) {
    TIERFS_LOG(kWarning, "tier {}: journal write failed: {}", path_, std::strerror(-err));
  }
  if (replaced) journal_.AppendRemove(*replaced);
  SyncBatchIfDue();
}

std::shared_ptr<TierFile> JournaledDirectoryTier::DropIfEmpty(Files::iterator it) {
  const TierFile& f = *it->second;
  if (f.chunks > 0 || f.writers > 0 || f.pinned()) return nullptr;
  std::shared_ptr<TierFile> out = std::move(it->second);
  files_.erase(it);
  return out;
}

bool JournaledDirectoryTier::Stored(ChunkKey key, uint64_t record) const {
  ReaderMutexLock lock(mu_);
  auto it = index_.find(key);
  return it != index_.end() && it->second.record == record;
}

int JournaledDirectoryTier::Read(ChunkKey key, uint64_t off, size_t n, char* scratch,
                                 TierRead* out) {
  Entry e;
  {
    ReaderMutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return -ENOENT;
    e = it->second;
  }
  std::shared_ptr<LocalFile> file;
  // Its file unlinked meanwhile: -ENOENT, and the caller falls back to SOURCE
  // (or a descriptor kept open, which reads what the file held: the check
  // below answers -ENOENT then).
  if (int err = open_files_.Get(e.file->seq, e.file->path, &file); err < 0) return err;
  size_t want = off >= e.length ? 0 : std::min<uint64_t>(n, e.length - off);
  ssize_t got = file->pread(scratch, want, e.offset + off);
  if (got < 0) return static_cast<int>(got);
  if (static_cast<size_t>(got) < want) return -EIO;  // a file shorter than recorded is damaged
  // A removal may have punched the range while we read it, and a hole reads
  // as zeros. Remove takes the chunk out of the index before it punches (and
  // a range punched for an older copy is punched before this copy's writer
  // took it: ChunkRanges), so if this copy is still stored now, no punch of
  // its range began before the pread ended: the bytes are the chunk's.
  if (!Stored(key, e.record)) return -ENOENT;
  out->data = scratch;
  out->size = want;
  return 0;
}

uint64_t JournaledDirectoryTier::Remove(ChunkKey key) {
  Entry e;
  std::shared_ptr<TierFile> gone;
  {
    WriterMutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return 0;
    e = std::move(it->second);
    index_.erase(it);
    e.file->resident -= e.length;
    --e.file->chunks;
    auto f = files_.find(key.node);
    if (f != files_.end() && f->second == e.file) gone = DropIfEmpty(f);
  }
  // Before the bytes go: a restart finds no record of a punched range (but
  // for a publication racing this removal, Finish: recovery's hole check).
  journal_.AppendRemove(e.record);
  if (gone) {
    Unlink(*gone);  // readers with the file open read what it held
  } else {
    e.file->LetGo(key.chunk, e.gen, e.offset, e.length);  // punched, or at the last unpin
  }
  NoteRemoved(key.node);
  return e.length;
}

void JournaledDirectoryTier::UnlinkIfEmpty(NodeId id, const std::shared_ptr<TierFile>& file) {
  std::shared_ptr<TierFile> gone;
  {
    WriterMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it != files_.end() && it->second == file) gone = DropIfEmpty(it);
  }
  if (gone) Unlink(*gone);
}

void JournaledDirectoryTier::Unlink(const TierFile& gone) {
  io_->unlink(gone.path);
  open_files_.Forget(gone.seq);  // after the unlink: no later read keeps it open
}

// A tier file holds the file's chunks at their own offsets: it is the
// backing file of the whole file once every chunk is stored in it.
int JournaledDirectoryTier::PinBacking(NodeId id, uint64_t size, uint64_t* token) {
  WriterMutexLock lock(mu_);
  auto it = files_.find(id);
  if (it == files_.end()) return -ENOENT;
  TierFile& f = *it->second;
  if (f.size != size || f.resident != size || f.chunks == 0) return -ENOENT;
  f.Pin();
  *token = f.seq;
  return 0;
}

void JournaledDirectoryTier::UnpinBacking(NodeId id, uint64_t token) {
  std::shared_ptr<TierFile> file;
  {
    ReaderMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end() || it->second->seq != token) return;
    file = it->second;
  }
  // The last unpin punches the ranges of the chunks removed meanwhile.
  if (file->Unpin()) UnlinkIfEmpty(id, file);
}

// Opened directly, not through FileIo: the kernel needs a real descriptor.
int JournaledDirectoryTier::OpenBacking(NodeId id, uint64_t token) {
  std::shared_ptr<TierFile> file;
  {
    ReaderMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end() || it->second->seq != token) return -ENOENT;
    file = it->second;
  }
  int fd = ::open(file->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != file->size) {
    ::close(fd);
    return -EIO;  // not the file recorded
  }
  return fd;
}

void JournaledDirectoryTier::SyncNow() {
  unsynced_.store(0, std::memory_order_relaxed);
  last_sync_ns_.store(NowNs(), std::memory_order_relaxed);
  int err = io_->sync_dir(data_);  // the names of the tier files made since
  if (int j = journal_.Sync(); err == 0 && j != -EBADF) err = j;
  if (err < 0) {
    TIERFS_LOG(kWarning, "tier {}: cannot sync its publishes: {}", path_, std::strerror(-err));
  }
}

void JournaledDirectoryTier::SyncBatchIfDue() {
  uint64_t n = unsynced_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n < kSyncBatch && NowNs() - last_sync_ns_.load(std::memory_order_relaxed) < kSyncAgeNs) {
    return;
  }
  if (syncing_.exchange(true)) return;
  SyncNow();
  syncing_.store(false);
}

}  // namespace tierfs::directory_tier
