// The RAM tier's memory files: one per file, its chunks at their own
// offsets (memory_tier.cc), in a memfd or in a tmpfs of the daemon's own.
// Internal to tiering/store.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tiering/store/chunk_ranges.h"

namespace tierfs::memory_files {

using Buffer = std::vector<char>;

// Faults in the whole pages of a fresh buffer with one call: a cold epoch
// fills the tier with fresh memory, and a page fault per 4 KiB (on a
// virtual machine, each a trip through the hypervisor) cost the promotion
// threads more than the copies. Best effort: an older kernel says EINVAL and
// the pages fault in as they are written.
void Prefault(char* data, size_t n);

// Memory files open now, shared with the files (a file may outlive the
// tier in a reply's hold).
using FileCount = std::atomic<uint64_t>;

// One file's memory file, `size` bytes long (holes where no chunk is).
// Closed with its last holder: the tier, a chunk, a writer. A chunk's range
// is let go (ChunkRanges::LetGo) when that chunk is let go by all its
// holders (the tier's index, readers, its writer and early readers).
struct MemFile final : ChunkRanges {
  int fd = -1;
  uint64_t size = 0;
  uint64_t token = 0;  // names this memory file among all the tier's
  std::shared_ptr<FileCount> files;
  // Guarded by MemoryTier::mu_ (memory_tier.cc):
  uint64_t resident = 0;  // bytes of its published chunks
  uint32_t writers = 0;   // chunks being written into it

  MemFile() = default;
  ~MemFile() override;

 private:
  void Free(uint64_t offset, uint64_t length) override;
};

// One stored chunk: a heap buffer, or `size` bytes at `offset` of a memory
// file, owning that range as generation `gen` of chunk `chunk`.
struct MemChunk {
  Buffer heap;
  std::shared_ptr<MemFile> file;
  uint32_t chunk = 0;
  uint64_t gen = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  MemChunk() = default;
  MemChunk(const MemChunk&) = delete;
  MemChunk& operator=(const MemChunk&) = delete;
  ~MemChunk();
};

// A shared mapping of a chunk's range of a memory file being written,
// unmapped by the last holder: the writer, and readers served from it
// before it is published. `data` is the chunk's first byte.
struct Mapping {
  char* addr = nullptr;
  size_t length = 0;
  char* data = nullptr;
  std::shared_ptr<const MemChunk> chunk;  // its range stays its own while mapped
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping(char* a, size_t n, size_t skip) : addr(a), length(n), data(a + skip) {}
  ~Mapping();
};

// A memory file of `size` bytes, none allocated: 0 with *fd, or -errno.
// In `huge_fs` (NewHugePageMemoryFs) if it is open: an unnamed file there;
// else a memfd, whose growing and shrinking are sealed off. Either way no
// one but this daemon and the kernel (for passthrough) holds a descriptor.
int NewMemoryFile(uint64_t size, int huge_fs, int* fd);

// Maps [offset, offset+length) of memory file `fd` for writing, its pages
// allocated (so the tier never fails for want of memory half-way): 0 with
// *map, or -errno. `by_file`: allocated through the file (fallocate), which
// a tmpfs with huge pages gives whole 2 MiB folios wherever the file's size
// covers them; a mapping's faults would not (its address is not aligned).
int MapRange(int fd, uint64_t offset, uint64_t length, bool by_file, std::shared_ptr<Mapping>* map);

}  // namespace tierfs::memory_files
