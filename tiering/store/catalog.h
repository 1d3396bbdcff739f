// Catalog: where each chunk of each file is now: on SOURCE only, being
// promoted (in flight), or resident in a tier. One byte per chunk, read
// without locks on the hot path.
//
// State changes: OnSource -> InFlight (TryBegin, by exactly one promoter),
// InFlight -> Resident(t) (Publish) or -> OnSource (Abort), Resident(t) ->
// OnSource (Evict), and OnSource -> Resident(t) for a chunk a directory tier
// kept across a restart (Recover). Readers that find a chunk in flight wait
// for it in the store's in-flight table (in_flight.h) instead of reading
// SOURCE a second time; the catalog itself has no waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tiering/namespace/namespace.h"
#include "tiering/store/tier.h"

namespace tierfs {

class Catalog {
 public:
  static constexpr uint8_t kOnSource = 0;
  static constexpr uint8_t kInFlight = 1;
  static constexpr uint8_t kResidentBase = 2;  // resident in tier (state - kResidentBase)
  static constexpr int kMaxTiers = 250;

  // Every regular file of `ns` is split into chunks of `chunk_size` bytes,
  // but a file of more than `max_file_chunks` chunks (larger than any tier
  // can hold) gets none: it is not tiered, costs no per-chunk state, and
  // is read from SOURCE. The state is a byte per chunk of the tiered files,
  // so a file claiming an EiB (sparse, or a FUSE SOURCE's word) costs
  // nothing here.
  Catalog(const Namespace& ns, uint64_t chunk_size, uint64_t max_file_chunks = UINT32_MAX);

  uint64_t chunk_size() const { return chunk_size_; }
  uint32_t chunks(NodeId id) const { return static_cast<uint32_t>(first_[id + 1] - first_[id]); }
  // Whether regular file `id` is tiered (has chunks, or is empty).
  bool tiered(NodeId id) const { return chunks(id) > 0 || ns_.node(id).size == 0; }
  // Regular files too large to tier.
  uint64_t untiered_files() const { return untiered_files_; }
  // Bytes in chunk `c` of node `id`.
  uint64_t length(NodeId id, uint32_t c) const;

  uint8_t state(ChunkKey k) const { return At(k).load(std::memory_order_acquire); }
  static bool IsResident(uint8_t s) { return s >= kResidentBase; }
  static int TierOf(uint8_t s) { return s - kResidentBase; }

  // OnSource -> InFlight; true for the one caller that made the change.
  bool TryBegin(ChunkKey k);
  // OnSource -> Resident(tier) at once: a chunk recovered from a directory
  // tier before anyone reads; false if it was not on SOURCE.
  bool Recover(ChunkKey k, int tier);
  // InFlight -> Resident(tier).
  void Publish(ChunkKey k, int tier);
  // InFlight -> OnSource.
  void Abort(ChunkKey k);
  // Resident(tier) -> OnSource; false if it was not resident there.
  bool Evict(ChunkKey k, int tier);

  // Resident chunks per tier, and the files all of whose chunks are resident
  // somewhere (computed by a scan: for stats, not the hot path).
  std::vector<uint64_t> ResidentChunksPerTier(int tiers) const;
  uint64_t FullyResidentFiles() const;

 private:
  std::atomic<uint8_t>& At(ChunkKey k) const { return states_[first_[k.node] + k.chunk]; }

  const Namespace& ns_;
  const uint64_t chunk_size_;
  uint64_t untiered_files_ = 0;
  std::vector<uint64_t> first_;  // first_[id]: index of node id's first chunk; size ns.size()+1
  std::unique_ptr<std::atomic<uint8_t>[]> states_;
};

}  // namespace tierfs
