// ChunkStore's side of the reclaimer (reclaimer.h): the job that makes room
// in a tier, and the free room each tier keeps.
#include <algorithm>

#include "tiering/base/mutex.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

void ChunkStore::Reclaim(int t) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  EvictNamed(t);
  EvictUntilFree(t, MarksOf(*tier).high, Victims::kSpare);
  tier->Maintain();
}

void ChunkStore::NameVictims(int t, uint64_t bytes) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  MutexLock lock(named_mu_);
  uint64_t& named_bytes = named_bytes_[static_cast<size_t>(t)];
  while (true) {
    // (A tier found full has its limit lowered below its use: the named
    // bytes count against the excess too.)
    if (tier->used() + bytes <= tier->limit() + named_bytes) return;
    Named victim;
    victim.copy = CopyIn(t, &victim.key, true);
    if (!victim.copy && !policy_->NextVictim(t, &victim.key)) return;  // nothing more may go
    named_[static_cast<size_t>(t)].push_back(victim);
    named_bytes += catalog_->length(victim.key.node, victim.key.chunk);
  }
}

void ChunkStore::EvictNamed(int t) {
  while (true) {
    Named victim;
    {
      MutexLock lock(named_mu_);
      std::vector<Named>& named = named_[static_cast<size_t>(t)];
      if (named.empty()) return;
      victim = named.back();
      named.pop_back();
    }
    EvictVictim(t, victim.key, victim.copy);
    // Counted as named until its room is free: a claim meanwhile names less.
    MutexLock lock(named_mu_);
    named_bytes_[static_cast<size_t>(t)] -= catalog_->length(victim.key.node, victim.key.chunk);
  }
}

void ChunkStore::EvictUntilFree(int t, uint64_t bytes, Victims which) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  while (true) {
    const uint64_t limit = tier->limit();
    const uint64_t used = tier->used();
    if (used <= limit && limit - used >= bytes) break;
    ChunkKey victim;
    const bool copy = CopyIn(t, &victim);
    if (!copy && !(which == Victims::kForClaim ? policy_->NextVictim(t, &victim)
                                               : policy_->SpareVictim(t, &victim))) {
      break;  // nothing more may go
    }
    // A victim the policy named but that is no longer resident here (being
    // dropped by a reader, say) frees nothing: the next one is asked for.
    EvictVictim(t, victim, copy);
  }
}

bool ChunkStore::EvictVictim(int t, ChunkKey victim, bool copy) {
  const uint8_t resident_here = static_cast<uint8_t>(Catalog::kResidentBase + t);
  if (catalog_->state(victim) != resident_here || Evict(victim, t) == 0) return false;
  if (copy) {
    policy_->Dropped(victim, t);  // not the policy's pick: it forgets the chunk
    counters_.copies_evicted.fetch_add(1, std::memory_order_relaxed);
  }
  counters_.evicted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Watermarks ChunkStore::MarksOf(const Tier& tier) const {
  const uint64_t largest = largest_claim_.load(std::memory_order_relaxed);
  const uint64_t chunk =
      largest == 0 ? catalog_->chunk_size() : std::min(largest, catalog_->chunk_size());
  return Watermarks::For(tier.limit(), chunk, reclaimer_.runs_inline());
}

bool ChunkStore::CopyIn(int t, ChunkKey* copy, bool take) {
  const uint8_t resident_here = static_cast<uint8_t>(Catalog::kResidentBase + t);
  MutexLock lock(copies_mu_);
  for (auto it = copies_.begin(); it != copies_.end(); ++it) {
    if (catalog_->state(*it) == resident_here) {
      *copy = *it;
      if (take) copies_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace tierfs
