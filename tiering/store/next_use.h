// When files are needed next: the information clairvoyant (Belady) eviction
// runs on. The prefetch planner knows the declared order and answers through
// this interface; tiering only asks, so nothing in tiering calls up into the
// planner's code.
#pragma once

#include <cstdint>
#include <limits>

#include "tiering/store/tier.h"

namespace tierfs {

// When a chunk is needed, in reads still to come before it (comparable
// across declared orders); kNever when there is no such use.
struct NextUses {
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  uint64_t next = kNever;   // the coming use
  uint64_t after = kNever;  // the use after that one
  // Names the coming use's occurrence (it stays the same while that use is
  // to come, though `next` may count down): kNever for none.
  uint64_t next_id = kNever;
};

class NextUseOracle {
 public:
  virtual ~NextUseOracle() = default;
  // Thread-safe. May take the planner's lock: callers may hold only locks
  // that come before it in the lock order (docs/ARCHITECTURE.md).
  // A file's chunks share its declared uses, except while the file is being
  // read: its chunks the reader has not reached yet are needed now.
  virtual NextUses NextUse(ChunkKey key) const = 0;
};

}  // namespace tierfs
