// ChunkStore's side of the reclaimer (reclaimer.h): the job that makes room
// in a tier, and the free room each tier keeps.
#include <algorithm>

#include "tiering/store/chunk_store.h"

namespace tierfs {

void ChunkStore::Reclaim(int t) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  EvictUntilFree(t, std::max(MarksOf(*tier).high, reclaimer_.TakeWanted(t)));
  tier->Maintain();
}

void ChunkStore::EvictUntilFree(int t, uint64_t bytes) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  const uint8_t resident_here = static_cast<uint8_t>(Catalog::kResidentBase + t);
  while (true) {
    const uint64_t limit = tier->limit();
    const uint64_t used = tier->used();
    if (used <= limit && limit - used >= bytes) break;
    ChunkKey victim;
    const bool copy = CopyIn(t, &victim);
    if (!copy && !policy_->NextVictim(t, &victim)) break;  // nothing more may go
    // A victim the policy named but that is no longer resident here (being
    // dropped by a reader, say) frees nothing: the next one is asked for.
    if (catalog_->state(victim) != resident_here || Evict(victim, t) == 0) continue;
    if (copy) {
      policy_->Dropped(victim, t);  // not the policy's pick: it forgets the chunk
      counters_.copies_evicted.fetch_add(1, std::memory_order_relaxed);
    }
    counters_.evicted.fetch_add(1, std::memory_order_relaxed);
  }
}

Watermarks ChunkStore::MarksOf(const Tier& tier) const {
  const uint64_t largest = largest_claim_.load(std::memory_order_relaxed);
  const uint64_t chunk =
      largest == 0 ? catalog_->chunk_size() : std::min(largest, catalog_->chunk_size());
  return Watermarks::For(tier.limit(), chunk, reclaimer_.runs_inline());
}

bool ChunkStore::CopyIn(int t, ChunkKey* copy) const {
  const uint8_t resident_here = static_cast<uint8_t>(Catalog::kResidentBase + t);
  std::lock_guard lock(copies_mu_);
  for (const ChunkKey& k : copies_) {
    if (catalog_->state(k) == resident_here) {
      *copy = k;
      return true;
    }
  }
  return false;
}

}  // namespace tierfs
