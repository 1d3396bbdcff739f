// Placement policies: which tier a promoted chunk goes to, and (for lru)
// what is evicted to make room. Small interfaces chosen by name.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiering/tier.h"

namespace tierfs {

// Evicts chunk `key` from tier `tier`: drops it from the catalog and the tier
// and releases its budget. Returns the bytes freed (0 if it was not there).
using Evictor = std::function<uint64_t(ChunkKey key, int tier)>;

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual const char* name() const = 0;
  // Picks a tier for chunk `key` of `bytes` bytes and reserves the bytes
  // there. Returns the tier's index, or -1 if it fits nowhere.
  // Thread-safe.
  virtual int Place(ChunkKey key, uint64_t bytes) = 0;
  // The chunk became resident in `tier` (it was Placed there).
  virtual void Published(ChunkKey, int) {}
  // A promotion placed in `tier` was given up (its budget already released).
  virtual void Abandoned(ChunkKey, int) {}
  // A read was served from the chunk.
  virtual void Touched(ChunkKey) {}
  uint64_t evictions() const { return evictions_; }

 protected:
  std::atomic<uint64_t> evictions_{0};
};

// Monarch's policy: the fastest tier with room; nothing is ever evicted. A
// chunk that fits nowhere stays on SOURCE, and smaller ones are still placed.
std::unique_ptr<PlacementPolicy> NewFirstFitPolicy(std::vector<Tier*> tiers);

// Least recently used: as first-fit while there is room; then, in the
// fastest tier that could hold the chunk, the least recently read chunks are
// evicted until it fits.
std::unique_ptr<PlacementPolicy> NewLruPolicy(std::vector<Tier*> tiers, Evictor evict);

// The names NewPlacementPolicy accepts.
inline const std::vector<std::string>& PlacementPolicyNames() {
  static const std::vector<std::string> names = {"first-fit", "lru"};
  return names;
}
// nullptr for an unknown name.
std::unique_ptr<PlacementPolicy> NewPlacementPolicy(const std::string& name,
                                                    std::vector<Tier*> tiers, Evictor evict);

}  // namespace tierfs
