// The RAM tier: each chunk is one heap buffer, or (UseMemoryFiles) each
// file is one memory file (memfd) holding its chunks at their own offsets,
// each chunk written through a mapping of its range that also serves reads
// while it is written. Reads reply straight from a heap buffer (no copy) or
// copy from the memory file; a chunk removed while being read stays alive
// until the reply. Removing a chunk of a memory file frees its range
// (fallocate PUNCH_HOLE), unless the file is pinned as a backing file: the
// kernel then reads the file's bytes from the tier's own pages (FUSE
// passthrough), so they are held once in memory, not again in the page
// cache of the mount, and its range is freed at the last unpin.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/store/memory_file.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using memory_files::Buffer;
using memory_files::FileCount;
using memory_files::Mapping;
using memory_files::MapRange;
using memory_files::MemChunk;
using memory_files::MemFile;
using memory_files::NewMemoryFile;
using memory_files::Prefault;

class MemoryTier final : public Tier {
 public:
  MemoryTier(std::string name, uint64_t budget) : Tier(std::move(name), Kind::kMemory, budget) {}

  int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                 std::unique_ptr<ChunkWriter>* out) override;

  int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) override {
    std::shared_ptr<const MemChunk> c = Find(key);
    if (!c) return -ENOENT;
    const size_t want = off >= c->size ? 0 : std::min<size_t>(n, c->size - off);
    if (!c->file) {
      out->size = want;
      out->data = c->heap.data() + std::min<size_t>(off, c->size);
      out->hold = std::move(c);
      return 0;
    }
    size_t got = 0;
    while (got < want) {
      ssize_t r = ::pread(c->file->fd, scratch + got, want - got,
                          static_cast<off_t>(c->offset + off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) return -EIO;  // shorter than stored: never, the size is sealed
      got += static_cast<size_t>(r);
    }
    out->size = want;
    out->data = scratch;
    return 0;
  }

  int PinBacking(NodeId id, uint64_t size, uint64_t* token) override {
    WriterMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end()) return max_files_ == 0 ? -EOPNOTSUPP : -ENOENT;
    MemFile& f = *it->second;
    if (f.size != size || f.resident != size) return -ENOENT;
    f.Pin();
    *token = f.token;
    return 0;
  }

  void UnpinBacking(NodeId id, uint64_t token) override {
    std::shared_ptr<MemFile> gone;  // closed, if it was the last holder, after the lock
    WriterMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end() || it->second->token != token || !it->second->Unpin()) return;
    gone = DropIfEmpty(it);
  }

  int OpenBacking(NodeId id, uint64_t token) override {
    ReaderMutexLock lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end() || it->second->token != token) return -ENOENT;
    int fd = ::fcntl(it->second->fd, F_DUPFD_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
  }

  void UseMemoryFiles(uint64_t max_files, int huge_fs) override {
    max_files_ = max_files;
    if (huge_fs >= 0) huge_fs_ = ::fcntl(huge_fs, F_DUPFD_CLOEXEC, 0);
  }
  ~MemoryTier() override {
    if (huge_fs_ >= 0) ::close(huge_fs_);  // the files in it live on with their holders
  }

  uint64_t Remove(ChunkKey key) override {
    // Let go after the lock is released (its range freed when readers are done).
    std::shared_ptr<const MemChunk> dropped;
    std::shared_ptr<MemFile> gone;
    {
      WriterMutexLock lock(mu_);
      auto it = chunks_.find(key);
      if (it == chunks_.end()) return 0;
      dropped = std::move(it->second);
      chunks_.erase(it);
      if (dropped->file) {
        dropped->file->resident -= dropped->size;
        auto f = files_.find(key.node);
        if (f != files_.end() && f->second == dropped->file) gone = DropIfEmpty(f);
      }
    }
    NoteRemoved(key.node);
    return dropped->size;
  }

  size_t chunks() const override {
    ReaderMutexLock lock(mu_);
    return chunks_.size();
  }

  // A writer is done with its memory file; `c` (if not null) is published.
  void Finish(ChunkKey key, const std::shared_ptr<MemFile>& file,
              std::shared_ptr<const MemChunk> c) {
    WriterMutexLock lock(mu_);
    if (file) --file->writers;
    if (c && file) file->resident += c->size;
    if (c) chunks_[key] = std::move(c);
    auto f = files_.find(key.node);
    if (file && f != files_.end() && f->second == file) DropIfEmpty(f);
  }

  // The memory file of the file `origin` is a chunk of, a writer counted in
  // it: null (then a heap buffer) when not asked for, too many are open, or
  // none can be had.
  std::shared_ptr<MemFile> TakeMemoryFile(ChunkKey key, const ChunkOrigin& origin) {
    if (max_files_ == 0 || origin.length == 0 || origin.offset > origin.file_size ||
        origin.length > origin.file_size - origin.offset) {
      return nullptr;
    }
    WriterMutexLock lock(mu_);
    auto it = files_.find(key.node);
    if (it == files_.end()) {
      if (files_count_->fetch_add(1, std::memory_order_relaxed) >= max_files_) {
        files_count_->fetch_sub(1, std::memory_order_relaxed);
        return nullptr;
      }
      auto f = std::make_shared<MemFile>();
      f->files = files_count_;
      f->size = origin.file_size;
      f->token = ++tokens_;
      if (NewMemoryFile(origin.file_size, huge_fs_, &f->fd) < 0)
        return nullptr;  // counted down by ~MemFile
      it = files_.emplace(key.node, std::move(f)).first;
    }
    if (it->second->size != origin.file_size) return nullptr;  // another file's: never
    ++it->second->writers;
    return it->second;
  }
  const std::shared_ptr<FileCount>& files() const { return files_count_; }

 private:
  using Files = std::unordered_map<NodeId, std::shared_ptr<MemFile>>;
  std::shared_ptr<const MemChunk> Find(ChunkKey key) const {
    ReaderMutexLock lock(mu_);
    auto it = chunks_.find(key);
    return it == chunks_.end() ? nullptr : it->second;
  }
  // Forgets a memory file that holds, writes and pins nothing; returns it
  // (to be closed after the lock), or null.
  std::shared_ptr<MemFile> DropIfEmpty(Files::iterator it) REQUIRES(mu_) {
    const MemFile& f = *it->second;
    if (f.resident > 0 || f.writers > 0 || f.pinned()) return nullptr;
    std::shared_ptr<MemFile> out = std::move(it->second);
    files_.erase(it);
    return out;
  }

  uint64_t max_files_ = 0;  // set before any store
  int huge_fs_ = -1;        // set before any store
  const std::shared_ptr<FileCount> files_count_ = std::make_shared<FileCount>(0);
  // Guards chunks_, files_, tokens_ and the counts of every MemFile. Takes a
  // memory file's ChunkRanges::mu_ under it (Pin, Unpin, pinned); taken
  // under no other lock (docs/ARCHITECTURE.md, "Concurrency and lock order").
  mutable SharedMutex mu_;
  std::unordered_map<ChunkKey, std::shared_ptr<const MemChunk>, ChunkKeyHash> chunks_
      GUARDED_BY(mu_);
  Files files_ GUARDED_BY(mu_);  // by node: the memory file of each file with chunks in it
  uint64_t tokens_ GUARDED_BY(mu_) = 0;
};

class MemoryWriter final : public ChunkWriter {
 public:
  // `file` and `map`: a memory file and the chunk's range of it to write
  // into, or null for a heap buffer.
  MemoryWriter(MemoryTier* tier, ChunkKey key, const ChunkOrigin& origin,
               std::shared_ptr<MemFile> file, std::shared_ptr<Mapping> map)
      : tier_(tier),
        key_(key),
        length_(origin.length),
        chunk_(std::make_shared<MemChunk>()),
        file_(std::move(file)),
        map_(std::move(map)) {
    chunk_->size = length_;
    if (file_) {
      chunk_->gen = file_->Take(key.chunk);
      chunk_->chunk = key.chunk;
      chunk_->offset = origin.offset;
      chunk_->file = file_;
      map_->chunk = chunk_;
    } else {
      chunk_->heap.reserve(length_);
      Prefault(chunk_->heap.data(), length_);
    }
  }
  ~MemoryWriter() override { Abort(); }
  int Append(const char* data, size_t n) override {
    if (!chunk_ || written_ + n > length_) return -EOVERFLOW;  // more than was reserved
    if (map_) {
      std::memcpy(map_->data + written_, data, n);
    } else {
      chunk_->heap.insert(chunk_->heap.end(), data, data + n);
    }
    written_ += n;
    return 0;
  }
  int Commit() override {
    if (!chunk_ || written_ != length_) {  // incomplete
      Abort();
      return -EIO;
    }
    map_.reset();  // unmapped once early readers are done with it
    tier_->Finish(key_, file_, std::move(chunk_));
    file_.reset();
    return 0;
  }
  void Abort() override {
    map_.reset();
    chunk_.reset();  // its range freed when early readers are done with it
    if (file_) tier_->Finish(key_, file_, nullptr);
    file_.reset();
  }
  // Reserved whole (a heap buffer) or mapped whole (a memory file):
  // appending never moves the bytes.
  const char* Contents(std::shared_ptr<const void>* hold) override {
    if (!chunk_) return nullptr;
    if (map_) {
      *hold = map_;
      return map_->data;
    }
    *hold = chunk_;
    return chunk_->heap.data();
  }

 private:
  MemoryTier* const tier_;
  const ChunkKey key_;
  const uint64_t length_;
  std::shared_ptr<MemChunk> chunk_;
  std::shared_ptr<MemFile> file_;  // a memory file's, until published or aborted
  std::shared_ptr<Mapping> map_;   // the chunk's range of it, until published
  uint64_t written_ = 0;
};

int MemoryTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                           std::unique_ptr<ChunkWriter>* out) {
  std::shared_ptr<MemFile> file = TakeMemoryFile(key, origin);
  std::shared_ptr<Mapping> map;
  if (file && MapRange(file->fd, origin.offset, origin.length, huge_fs_ >= 0, &map) < 0) {
    Finish(key, file, nullptr);  // a heap buffer instead
    file.reset();
  }
  try {
    *out = std::make_unique<MemoryWriter>(this, key, origin, file, std::move(map));
    return 0;
  } catch (const std::bad_alloc&) {
    if (file) Finish(key, file, nullptr);
    return -ENOMEM;
  }
}

}  // namespace

std::unique_ptr<Tier> NewMemoryTier(std::string name, uint64_t budget) {
  return std::make_unique<MemoryTier>(std::move(name), budget);
}

}  // namespace tierfs
