// The tiers as the source of FUSE passthrough's backing files: a file is
// passed through when every chunk of it is resident in one tier and that
// tier holds it in one file (Tier::PinBacking).
#pragma once

#include "fs/fuse/passthrough.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class Backend;
class ChunkStore;
class Tier;

// What passthrough=auto decides on a mount whose daemon may pass through:
// "" (on) when passthrough pays, else why not. It pays unless both hold:
// files under kLargeFile bytes hold most of the data (each open then
// costs a round trip comparable to the read it saves), and the node's
// memory holds what the RAM tier holds twice with room to spare (then the
// page cache serves warm reads of them without the daemon). No tiers:
// nothing to pass through. `node_memory`: bytes (MemTotal).
std::string PassthroughNotPaying(const Namespace& ns, const ChunkStore* chunks,
                                 uint64_t node_memory);
// Readies the tiers of `chunks` for passthrough through `opens`: memory
// files (in a tmpfs of the daemon's own with huge pages where one can be
// had, else memfds), at most `max_files`, as many registered backing files
// of closed files kept, and the tiers telling `opens` of each removal.
// REQUIRES: before the session starts; `opens` outlives the tiers' use.
void UseTierFiles(ChunkStore* chunks, PassthroughOpens* opens, uint64_t max_files);
// How many memory files the RAM tier may keep: what the open-file limit
// `fd_limit` leaves beside SOURCE's open files (`max_open`), what SOURCE
// (`source`: its directories) and `tiers` (a directory tier's read files)
// may keep open, and kReservedDescriptors; 0 if none.
uint64_t MemoryFileBudget(uint64_t fd_limit, uint64_t max_open, const Backend& source,
                          const std::vector<Tier*>& tiers);
// Descriptors left for the rest: the FUSE device, journals and lock files,
// the peer service's sockets and UCX's, epoll and event descriptors.
inline constexpr uint64_t kReservedDescriptors = 1024;
// The node's memory (MemTotal of /proc/meminfo), or 0 if unknown.
uint64_t NodeMemory();
inline constexpr uint64_t kLargeFile = uint64_t{1} << 20;

class TierBackingFiles final : public BackingFiles {
 public:
  // `chunks` may be null (no tiers): then no file has a backing file.
  TierBackingFiles(const Namespace* ns, ChunkStore* chunks) : ns_(ns), chunks_(chunks) {}
  int Pin(fuse_ino_t ino, uint64_t* token) override;
  void Unpin(fuse_ino_t ino, uint64_t token) override;
  int Open(fuse_ino_t ino, uint64_t token) override;
  // The tier that holds every chunk of regular file `id`, or -errno:
  // -ENOENT (not all resident, or in several tiers), -EOPNOTSUPP (empty,
  // untiered, no tiers).
  int WholeIn(NodeId id) const;

 private:
  // A token names the tier in its top byte and the tier's own token below.
  static constexpr int kTierShift = 56;
  const Namespace* const ns_;
  ChunkStore* const chunks_;
};

}  // namespace tierfs
