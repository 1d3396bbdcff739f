// ChunkProvider: where a PeerServer gets the chunks it serves. The daemon
// implements it over its ChunkStore: a chunk resident in a tier is served
// from there; one on SOURCE only is promoted first (this node is its home),
// so a job reads each chunk from SOURCE once.
#pragma once

#include <cerrno>
#include <chrono>
#include <memory>

#include "tiering/peers/transport/wire.h"

namespace tierfs {

struct ChunkBytes {
  char* scratch = nullptr;           // ref.length() bytes the provider may fill
  const char* data = nullptr;        // set by the provider: scratch, or memory it holds
  std::shared_ptr<const void> hold;  // keeps `data` alive until the bytes are sent
};

// Whether this node holds a chunk a peer asks after, for a kIfResident
// request: held (in a tier, or being promoted), not held (the asker reads
// SOURCE itself), or the file is one ReadChunk would refuse.
enum class Residence {
  kHeld,
  kNotHeld,
  kNoSuchFile,  // ReadChunk's -ENOENT
  kStale,       // ReadChunk's -ESTALE: the asker's snapshot and ours differ
};

// The -errno ReadChunk answers for a file Holds refused (kNoSuchFile,
// kStale); 0 for kHeld and kNotHeld.
inline int ResidenceErrno(Residence r) {
  return r == Residence::kNoSuchFile ? -ENOENT : r == Residence::kStale ? -ESTALE : 0;
}

class ChunkProvider {
 public:
  virtual ~ChunkProvider() = default;
  using Deadline = std::chrono::steady_clock::time_point;
  // Points out->data at the ref.length() bytes of the chunk `ref` names,
  // after checking that this node's snapshot describes the file as `ref`
  // does (size, mtime, ctime, inode number). 0, or -ENOENT (no such file),
  // -ESTALE (its identity differs), -EINVAL (another chunk size), -EIO,
  // -ETIMEDOUT (not read by `deadline`, the asker's). Called on the
  // server's threads, several at once; it may block (a promotion) but
  // gives up at `deadline`: every call holds one of the server's threads.
  virtual int ReadChunk(const ChunkRef& ref, Deadline deadline, ChunkBytes* out) = 0;
  // For a kIfResident request, on the server's progress thread (so quick:
  // no I/O). A provider that cannot tell says kHeld.
  virtual Residence Holds(const ChunkRef& ref) {
    (void)ref;
    return Residence::kHeld;
  }
  // Keeps the ref.chunk_length() bytes at `data` as chunk `ref` (whole),
  // offered by the authenticated peer that read them from SOURCE, if this
  // node's snapshot describes the file as `ref` does and a tier has room.
  // 0 kept, -EEXIST (held or in flight already), -ENOSPC, -ENOENT,
  // -ESTALE, -EINVAL, -EIO, or -ENOTSUP (this provider keeps nothing).
  // On one of the server's pool threads: it copies the bytes and may write
  // a file, and leaves whatever waits for an fdatasync to others.
  virtual int Adopt(const ChunkRef& ref, const char* data) {
    (void)ref, (void)data;
    return -ENOTSUP;
  }
};

}  // namespace tierfs
