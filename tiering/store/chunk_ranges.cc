#include "tiering/store/chunk_ranges.h"

namespace tierfs {

uint64_t ChunkRanges::Take(uint32_t chunk) {
  MutexLock lock(mu_);
  unfreed_.erase(chunk);
  return owners_[chunk] = ++generations_;
}

void ChunkRanges::LetGo(uint32_t chunk, uint64_t gen, uint64_t offset, uint64_t length) {
  MutexLock lock(mu_);
  auto it = owners_.find(chunk);
  if (it == owners_.end() || it->second != gen) return;  // written again since
  owners_.erase(it);
  if (pins_ > 0) {
    unfreed_[chunk] = {offset, length};
  } else {
    Free(offset, length);
  }
}

void ChunkRanges::Pin() {
  MutexLock lock(mu_);
  ++pins_;
}

bool ChunkRanges::Unpin() {
  MutexLock lock(mu_);
  if (pins_ == 0) return false;
  if (--pins_ > 0) return true;
  for (const auto& [chunk, range] : unfreed_) Free(range.first, range.second);
  unfreed_.clear();
  return true;
}

bool ChunkRanges::pinned() const {
  MutexLock lock(mu_);
  return pins_ > 0;
}

}  // namespace tierfs
