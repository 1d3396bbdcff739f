#include "prefetch/engine/chunk_source.h"

namespace tierfs {

ssize_t ChunkSource::Read(ChunkKey key, uint64_t off, size_t n, char* buf, int* home) {
  if (*home != kSource) {
    ssize_t r = peers_->Fetch(*home, key, off, n, buf);
    if (r == static_cast<ssize_t>(n)) return r;
    *home = kSource;  // it failed us (JobPeers counts the fallback)
  }
  return source_->Read(key.node, buf, n, static_cast<uint64_t>(key.chunk) * chunk_size_ + off);
}

bool ChunkSource::AskHome(ChunkKey key) {
  const int home = Home(key);
  return home == kSource || peers_->AskAhead(home, key);
}

}  // namespace tierfs
