// Promoter: copies chunks from SOURCE into tiers. A request claims the chunk
// in the catalog (so one promotion per chunk), asks the placement policy for
// a tier (reserving its bytes), and queues the copy on the executor. The copy
// reads SOURCE in large sequential requests, streams into the tier and
// publishes atomically; a failure leaves nothing visible and the chunk is
// served from SOURCE.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "prefetch/executor.h"
#include "tiering/catalog.h"
#include "tiering/placement.h"
#include "tiering/source_reader.h"
#include "tiering/tier.h"

namespace tierfs {

struct PromotionCounters {
  std::atomic<uint64_t> requested{0};  // chunks put in flight
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> rejected{0};  // the executor's lane was full
  std::atomic<uint64_t> no_room{0};   // fits in no tier
  std::atomic<uint64_t> bytes{0};     // bytes published
};

class Promoter {
 public:
  static constexpr size_t kReadSize = 1 << 20;  // one SOURCE request

  // Everything must outlive the promoter; the executor must be shut down
  // before the promoter is destroyed.
  Promoter(const Namespace* ns, Catalog* catalog, std::vector<Tier*> tiers, PlacementPolicy* policy,
           SourceReader* source, Executor* executor);

  // Starts promoting `key` if it is on SOURCE only. Returns true if this call
  // put it in flight (the caller may then wait on the catalog).
  bool Request(ChunkKey key, Executor::Lane lane);
  // Drops a resident chunk from `tier`; the Evictor of the LRU policy.
  uint64_t Evict(ChunkKey key, int tier);

  const PromotionCounters& counters() const { return counters_; }

 private:
  void Run(ChunkKey key, int tier);
  void Fail(ChunkKey key, int tier, const char* what, int err);

  const Namespace* const ns_;
  Catalog* const catalog_;
  const std::vector<Tier*> tiers_;
  PlacementPolicy* const policy_;
  SourceReader* const source_;
  Executor* const executor_;
  PromotionCounters counters_;
};

}  // namespace tierfs
