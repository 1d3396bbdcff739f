// The RAM tier: each chunk is one heap buffer, or (UseMemoryFiles) a chunk
// that is a whole file is one memory file (memfd), written through a
// mapping that also serves reads while it is written. Reads reply straight
// from a heap buffer (no copy) or copy from the memory file; a chunk
// removed while being read stays alive until the reply. A memory file is
// sealed once written, and OpenBacking hands out descriptors of it: the kernel then reads
// the file's bytes from the tier's own pages (FUSE passthrough), so they are
// held once in memory, not again in the page cache of the mount.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using Buffer = std::vector<char>;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Faults in the whole pages of a fresh buffer with one call: a cold epoch
// fills the tier with fresh memory, and a page fault per 4 KiB (on a
// virtual machine, each a trip through the hypervisor) cost the promotion
// threads more than the copies. Best effort: an older kernel says EINVAL and
// the pages fault in as they are written.
void Prefault(char* data, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (n < 16 * page) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// Memory files open now, shared with the chunks (a chunk may outlive the
// tier in a reply's hold).
using FileCount = std::atomic<uint64_t>;

// One stored chunk: a heap buffer, or a sealed memory file of `size` bytes.
struct MemChunk {
  Buffer heap;
  int fd = -1;
  uint64_t size = 0;
  std::shared_ptr<FileCount> files;  // with fd
  MemChunk() = default;
  MemChunk(const MemChunk&) = delete;
  MemChunk& operator=(const MemChunk&) = delete;
  ~MemChunk() {
    if (fd >= 0) {
      ::close(fd);
      files->fetch_sub(1, std::memory_order_relaxed);
    }
  }
};

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif

// A shared mapping of a memory file being written, unmapped by the last
// holder: the writer, and readers served from it before it is published.
struct Mapping {
  char* addr = nullptr;
  size_t length = 0;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping(char* a, size_t n) : addr(a), length(n) {}
  ~Mapping() { ::munmap(addr, length); }
};

// Asks for huge pages for a memory file of at least one huge page: the
// kernel (and passthrough readers) then copies from 2 MiB folios instead of
// 4 KiB pages. Only where the administrator allows it for shared memory
// (/sys/kernel/mm/transparent_hugepage/shmem_enabled "advise", or
// "within_size" / "always" without asking); elsewhere a no-op.
void AskHugePages(void* addr, uint64_t length) {
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  if (length >= kHuge) ::madvise(addr, length, MADV_HUGEPAGE);
}

// A memory file of `length` bytes, mapped, its pages allocated (so the
// tier never fails for want of memory half-way): 0 with *fd and *map set,
// or -errno (nothing left open).
int NewMemoryFile(uint64_t length, int* fd, std::shared_ptr<Mapping>* map) {
  int f = ::memfd_create("tierfs-chunk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f < 0) return -errno;
  int err = 0;
  void* addr = MAP_FAILED;
  if (::ftruncate(f, static_cast<off_t>(length)) != 0) {
    err = -errno;
  } else if ((addr = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)) ==
             MAP_FAILED) {
    err = -errno;
  } else if (AskHugePages(addr, length), ::madvise(addr, length, MADV_POPULATE_WRITE) != 0) {
    // Before Linux 5.14 (EINVAL) allocate without mapping; a failure is
    // the want of memory.
    err = errno == EINVAL && ::fallocate(f, 0, 0, static_cast<off_t>(length)) == 0 ? 0 : -errno;
  }
  if (err == 0) {
    try {
      *map = std::make_shared<Mapping>(static_cast<char*>(addr), length);
      *fd = f;
      return 0;
    } catch (const std::bad_alloc&) {
      err = -ENOMEM;
    }
  }
  if (addr != MAP_FAILED) ::munmap(addr, length);
  ::close(f);
  return err;
}

class MemoryTier final : public Tier {
 public:
  MemoryTier(std::string name, uint64_t budget) : Tier(std::move(name), Kind::kMemory, budget) {}

  int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                 std::unique_ptr<ChunkWriter>* out) override;

  int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) override {
    std::shared_ptr<const MemChunk> c = Find(key);
    if (!c) return -ENOENT;
    const size_t want = off >= c->size ? 0 : std::min<size_t>(n, c->size - off);
    if (c->fd < 0) {
      out->size = want;
      out->data = c->heap.data() + std::min<size_t>(off, c->size);
      out->hold = std::move(c);
      return 0;
    }
    size_t got = 0;
    while (got < want) {
      ssize_t r = ::pread(c->fd, scratch + got, want - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) return -EIO;  // shorter than stored: never, the file is sealed
      got += static_cast<size_t>(r);
    }
    out->size = want;
    out->data = scratch;
    return 0;
  }

  int OpenBacking(ChunkKey key) override {
    std::shared_ptr<const MemChunk> c = Find(key);
    if (!c) return -ENOENT;
    if (c->fd < 0) return -EOPNOTSUPP;
    int fd = ::fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
  }

  void UseMemoryFiles(uint64_t max_files) override { max_files_ = max_files; }

  uint64_t Remove(ChunkKey key) override {
    std::shared_ptr<const MemChunk> dropped;  // freed after the lock is released
    std::unique_lock lock(mu_);
    auto it = chunks_.find(key);
    if (it == chunks_.end()) return 0;
    dropped = std::move(it->second);
    chunks_.erase(it);
    return dropped->size;
  }

  size_t chunks() const override {
    std::shared_lock lock(mu_);
    return chunks_.size();
  }

  void Publish(ChunkKey key, std::shared_ptr<const MemChunk> c) {
    std::unique_lock lock(mu_);
    chunks_[key] = std::move(c);
  }

  // A memory file for a chunk that is a whole file, mapped for writing: 0,
  // or -1 (then a heap buffer): not asked for, too many open, or none to
  // be had.
  int TakeMemoryFile(const ChunkOrigin& origin, int* fd, std::shared_ptr<Mapping>* map) {
    if (max_files_ == 0 || origin.chunk != 0 || origin.length != origin.file_size ||
        origin.length == 0) {
      return -1;
    }
    if (files_->fetch_add(1, std::memory_order_relaxed) >= max_files_ ||
        NewMemoryFile(origin.length, fd, map) < 0) {
      files_->fetch_sub(1, std::memory_order_relaxed);
      return -1;
    }
    return 0;
  }
  const std::shared_ptr<FileCount>& files() const { return files_; }

 private:
  std::shared_ptr<const MemChunk> Find(ChunkKey key) const {
    std::shared_lock lock(mu_);
    auto it = chunks_.find(key);
    return it == chunks_.end() ? nullptr : it->second;
  }

  uint64_t max_files_ = 0;  // set before any store
  const std::shared_ptr<FileCount> files_ = std::make_shared<FileCount>(0);
  mutable std::shared_mutex mu_;  // guards chunks_; a leaf lock
  std::unordered_map<ChunkKey, std::shared_ptr<const MemChunk>, ChunkKeyHash> chunks_;
};

class MemoryWriter final : public ChunkWriter {
 public:
  // `fd` and `map`: a memory file to write into (owned from now on), or -1
  // and null for a heap buffer.
  MemoryWriter(MemoryTier* tier, ChunkKey key, uint64_t length, int fd,
               std::shared_ptr<Mapping> map)
      : tier_(tier),
        key_(key),
        length_(length),
        chunk_(std::make_shared<MemChunk>()),
        map_(std::move(map)) {
    chunk_->size = length;
    if (fd >= 0) {
      chunk_->fd = fd;
      chunk_->files = tier->files();
    } else {
      chunk_->heap.reserve(length);
      Prefault(chunk_->heap.data(), length);
    }
  }
  int Append(const char* data, size_t n) override {
    if (!chunk_ || written_ + n > length_) return -EOVERFLOW;  // more than was reserved
    if (map_) {
      std::memcpy(map_->addr + written_, data, n);
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
    // Sealed: no one holding a descriptor (the kernel, for passthrough)
    // can change, shrink or grow it. (F_SEAL_FUTURE_WRITE, not
    // F_SEAL_WRITE: early readers may still hold the writer's mapping.)
    if (chunk_->fd >= 0 &&
        ::fcntl(chunk_->fd, F_ADD_SEALS,
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
      int err = -errno;
      Abort();
      return err;
    }
    map_.reset();  // unmapped once early readers are done with it
    tier_->Publish(key_, std::move(chunk_));
    return 0;
  }
  void Abort() override {
    map_.reset();
    chunk_.reset();
  }
  // Reserved whole (a heap buffer) or mapped whole (a memory file):
  // appending never moves the bytes.
  const char* Contents(std::shared_ptr<const void>* hold) override {
    if (!chunk_) return nullptr;
    if (map_) {
      *hold = map_;
      return map_->addr;
    }
    *hold = chunk_;
    return chunk_->heap.data();
  }

 private:
  MemoryTier* const tier_;
  const ChunkKey key_;
  const uint64_t length_;
  std::shared_ptr<MemChunk> chunk_;
  std::shared_ptr<Mapping> map_;  // a memory file's, until published
  uint64_t written_ = 0;
};

int MemoryTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                           std::unique_ptr<ChunkWriter>* out) {
  int fd = -1;
  std::shared_ptr<Mapping> map;
  TakeMemoryFile(origin, &fd, &map);
  try {
    *out = std::make_unique<MemoryWriter>(this, key, origin.length, fd, std::move(map));
    return 0;
  } catch (const std::bad_alloc&) {
    if (fd >= 0) {
      ::close(fd);
      files_->fetch_sub(1, std::memory_order_relaxed);
    }
    return -ENOMEM;
  }
}

}  // namespace

std::unique_ptr<Tier> NewMemoryTier(std::string name, uint64_t budget) {
  return std::make_unique<MemoryTier>(std::move(name), budget);
}

}  // namespace tierfs
