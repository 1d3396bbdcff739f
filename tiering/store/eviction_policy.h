// Eviction policies: which resident chunk leaves a full tier to make room
// for a new one, or that none should (the new chunk is then not promoted).
// Placement itself is fixed: the fastest tier with room (Monarch). The
// ChunkStore owns the chunk's lifecycle and does every eviction; a policy
// only tracks residents and answers, so it never calls back into the store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiering/store/catalog.h"
#include "tiering/store/next_use_table.h"
#include "tiering/store/policy_names.h"
#include "tiering/store/tier.h"

namespace tierfs {

// How a chunk placed into a full tier is held.
enum class Hold {
  kKept,       // resident for all its later uses
  kTransient,  // only for its coming read; the first to go once read
};

// A chunk looking for room in a full tier.
struct Candidate {
  ChunkKey key;
  uint64_t bytes = 0;
  uint64_t tier_limit = 0;  // the tier's limit in force
};

// Thread-safe: every method may be called concurrently. Implementations
// hold their own lock only inside a call.
//
// Room is made in two steps (navy's split of admission and reclaim): a
// claim for a tier short of room asks Admit whether the chunk is worth a
// place there and, if so, takes what NextVictim names; the store's
// reclaimer, on a background thread, evicts those, and keeps free room
// ahead of need with what SpareVictim names. PickVictim is Admit and
// NextVictim at once: what a tier that evicted for this one chunk would do.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // Tier `tier` is short of room for `c`: true if `c` is worth a place
  // there, displacing what NextVictim names (or when nothing is resident
  // there to displace), with *hold saying how `c` would be held. False:
  // evict nothing for it there. Changes nothing the policy tracks.
  virtual bool Admit(int tier, const Candidate& c, Hold* hold) = 0;
  // The resident chunk of `tier` to evict first, no longer tracked from now
  // on. False: nothing there may be evicted.
  virtual bool NextVictim(int tier, ChunkKey* victim) = 0;
  // A resident chunk of `tier` that may go before any claim asks for its
  // room (the reclaimer keeping free room between its watermarks), no
  // longer tracked from now on: one the policy would evict first for any
  // chunk it admits. False: none may (room is then made for the claims the
  // policy admits, through NextVictim). By default NextVictim: an order that
  // needs no candidate (LRU) may evict ahead.
  virtual bool SpareVictim(int tier, ChunkKey* victim) { return NextVictim(tier, victim); }
  // Admit, then NextVictim: names a resident chunk of that tier to evict for
  // `c` and how `c` would be held. False: evict nothing for it there.
  bool PickVictim(int tier, const Candidate& c, ChunkKey* victim, Hold* hold) {
    return Admit(tier, c, hold) && NextVictim(tier, victim);
  }
  // `key`'s bytes were reserved in `tier`; `hold` comes from the last
  // PickVictim for it (kKept when it fitted without one).
  virtual void Admitted(ChunkKey key, int tier, Hold hold) = 0;
  // An admitted chunk became resident (it is readable from now on).
  virtual void Published(ChunkKey key, int tier) = 0;
  // An admitted chunk was given up before it was published.
  virtual void Abandoned(ChunkKey key, int tier) = 0;
  // A resident chunk left `tier` without being picked (found missing or
  // damaged in the tier).
  virtual void Dropped(ChunkKey key, int tier) = 0;
  // A read was served from the chunk.
  virtual void Touched(ChunkKey key) = 0;
  // Entries the policy keeps to order evictions, stale ones included (its
  // memory): reported as `promotions.policy_entries`.
  virtual size_t entries() const = 0;
};

// Clairvoyant eviction (HDMLP/NoPFS) on top of first-fit placement: the
// `next-use` policy. Without a declared order every next use is "never", so
// nothing is ever evicted: exactly Monarch's first-fit (the policy's earlier
// name, still accepted).
class BeladyPolicy : public EvictionPolicy {
 public:
  // `node`'s entry in the next-use table changed (its coming use was
  // consumed, or uses were declared or dropped).
  virtual void NextUseChanged(NodeId node) = 0;
  // Most transient chunks held per tier (the look-ahead window).
  // entries() is bounded by about twice the resident chunks, however many
  // reads went by.
  virtual void SetTransientLimit(size_t chunks) = 0;
};

// Next uses come from `next_uses` (null: every use is "never"), which must
// outlive the policy.
std::unique_ptr<BeladyPolicy> NewBeladyPolicy(int tiers, const Catalog* catalog,
                                              const NextUseTable* next_uses);
// Least recently read chunks go first.
std::unique_ptr<EvictionPolicy> NewLruPolicy(int tiers);

// nullptr for an unknown name.
std::unique_ptr<EvictionPolicy> NewEvictionPolicy(const std::string& name, int tiers,
                                                  const Catalog* catalog,
                                                  const NextUseTable* next_uses = nullptr);

}  // namespace tierfs
