// ClairvoyantPolicy: first-fit placement plus Belady eviction from a declared
// read order (HDMLP/NoPFS's clairvoyance). While there is room it places like
// first-fit. When no tier has room, in the fastest tier that could hold the
// chunk:
// 1. a transient chunk already read is dropped first (below);
// 2. if the resident chunk needed farthest in the future is needed later than
//    the new chunk's use *after* the coming one, it is evicted and the new
//    chunk stays resident (Belady with bypass: worth keeping);
// 3. otherwise the new chunk is only worth having for its coming read. It may
//    still be promoted as *transient* (so that read is served from the tier),
//    evicting the farthest chunk needed later than that read, while fewer
//    than the transient limit (the look-ahead window) are held; once read it
//    is the first to go. Else it is not promoted and is read from SOURCE.
// Steady-state SOURCE traffic is then what cannot be resident plus at most
// the transient window. With no declared order every next use is "never",
// so nothing is evicted: exactly first-fit (Monarch).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tiering/catalog.h"
#include "tiering/placement.h"

namespace tierfs {

// When a file is needed: its coming use and the one after (positions in the
// declared order; OrderPlan::kNever for none).
struct NextUses {
  uint64_t next;
  uint64_t after;
};
// May take the planner's lock: the policy calls it with its own lock held
// (lock order: policy, then planner).
using NextUseFn = std::function<NextUses(NodeId)>;

class ClairvoyantPolicy : public PlacementPolicy {
 public:
  // `node` was read (its coming use consumed) or newly declared. Must be
  // called without the planner's lock held.
  virtual void NextUseChanged(NodeId node) = 0;
  // Most transient chunks held per tier (the look-ahead window).
  virtual void SetTransientLimit(size_t chunks) = 0;
  // Entries kept to order evictions, stale ones included: bounded by about
  // twice the resident chunks, however many reads went by.
  virtual size_t ordering_entries() const = 0;
};

std::unique_ptr<ClairvoyantPolicy> NewClairvoyantPolicy(std::vector<Tier*> tiers, Evictor evict,
                                                        const Catalog* catalog, NextUseFn next_use);

}  // namespace tierfs
