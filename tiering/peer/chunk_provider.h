// ChunkProvider: where a PeerServer gets the chunks it serves. The daemon
// implements it over its ChunkStore: a chunk resident in a tier is served
// from there; one on SOURCE only is promoted first (this node is its home),
// so a job reads each chunk from SOURCE once.
#pragma once

#include <memory>

#include "tiering/peer/wire.h"

namespace tierfs {

struct ChunkBytes {
  char* scratch = nullptr;           // ref.length() bytes the provider may fill
  const char* data = nullptr;        // set by the provider: scratch, or memory it holds
  std::shared_ptr<const void> hold;  // keeps `data` alive until the bytes are sent
};

class ChunkProvider {
 public:
  virtual ~ChunkProvider() = default;
  // Points out->data at the ref.length() bytes of the chunk `ref` names,
  // after checking that this node's snapshot describes the file as `ref`
  // does. 0, or -ENOENT (no such file), -ESTALE (its size or mtime differ),
  // -EINVAL (another chunk size), -EIO. Called on the server's threads,
  // several at once; it may block (a promotion) but must give up in bounded
  // time: every call holds one of the server's threads.
  virtual int ReadChunk(const ChunkRef& ref, ChunkBytes* out) = 0;
};

}  // namespace tierfs
