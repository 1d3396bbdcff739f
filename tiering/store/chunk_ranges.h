// ChunkRanges: who owns each chunk's range of a tier file that holds a
// whole file's chunks at their own offsets (the RAM tier's memory files,
// a directory tier's sparse files), and the pins that keep freed ranges
// readable while the kernel reads the file as a passthrough backing file.
// Internal to tiering/store.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>

#include "tiering/base/mutex.h"

namespace tierfs {

// Each chunk's range is owned by the chunk last written there (its
// generation), and freed (a hole punched, by Free) when that generation is
// let go, or, if the file is pinned then, at the last unpin. A writer that
// takes a range again cancels a free still pending for it, so a late
// LetGo of an older generation never punches bytes written since.
class ChunkRanges {
 public:
  ChunkRanges() = default;
  ChunkRanges(const ChunkRanges&) = delete;
  ChunkRanges& operator=(const ChunkRanges&) = delete;
  virtual ~ChunkRanges() = default;

  // A writer takes chunk `chunk`'s range: its generation.
  uint64_t Take(uint32_t chunk);
  // Generation `gen` of chunk `chunk` is let go: its range is freed now
  // (under mu_, so no writer takes it meanwhile), or at the last unpin.
  void LetGo(uint32_t chunk, uint64_t gen, uint64_t offset, uint64_t length);
  void Pin();
  // False if it was not pinned. The last unpin frees the ranges let go meanwhile.
  bool Unpin();
  bool pinned() const;

 protected:
  // Punches [offset, offset+length) out of the file. Called with mu_ held.
  virtual void Free(uint64_t offset, uint64_t length) = 0;

 private:
  // Guards what follows; taken after the tier's own lock when both are held.
  mutable Mutex mu_;
  uint32_t pins_ GUARDED_BY(mu_) = 0;
  uint64_t generations_ GUARDED_BY(mu_) = 0;
  // chunk -> generation owning its range
  std::unordered_map<uint32_t, uint64_t> owners_ GUARDED_BY(mu_);
  // Ranges of chunks let go while pinned, by chunk: freed at the last unpin.
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> unfreed_ GUARDED_BY(mu_);
};

}  // namespace tierfs
