// ChunkHomes: where a chunk lives among the nodes of a job, and how its
// bytes are fetched from or offered to the node that homes it. The read
// engine (tiering/engine/chunk_source.h) asks through this and nothing
// else, so it knows no transport; the peer stack implements it
// (tiering/peers/client/job_peers.h), and the engine's tests use fakes.
//
// A home is named by a link: a small number >= 0 for another node, -1 for
// this node (its chunks come from SOURCE here).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tiering/namespace/chunk_key.h"

namespace tierfs {

class ChunkHomes {
 public:
  virtual ~ChunkHomes() = default;

  // The link of the node that is `key`'s home, or -1 when that is this node
  // (or no other node can be asked). Lock-free; called on every miss.
  virtual int Home(ChunkKey key) const = 0;
  // Fetches [off, off+n) of chunk `key` (off within the chunk) from the
  // node at `link` into `dest`: n, or -errno (the caller reads SOURCE).
  // Bounded by the peers' timeout. With `if_resident`, -ENODATA when that
  // node neither holds nor is promoting the chunk. With `source` (reads the
  // same n bytes from SOURCE into its argument), a home slow to answer may
  // be raced with SOURCE: then `*from_source` says SOURCE's bytes won.
  virtual ssize_t Fetch(int link, ChunkKey key, uint64_t off, size_t n, char* dest,
                        bool if_resident, const std::function<ssize_t(char*)>& source,
                        bool* from_source) = 0;
  // Offers the node at `link` the whole chunk `key` (n bytes at `data`),
  // without waiting. False if not sent.
  virtual bool Offer(int link, ChunkKey key, const char* data, size_t n) = 0;
  // Asks the node at `link` to promote chunk `key` now. True if it answered.
  virtual bool AskAhead(int link, ChunkKey key) = 0;
};

}  // namespace tierfs
