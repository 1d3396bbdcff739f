// Promoter: copies chunks from SOURCE into tiers. A request claims the chunk
// from the ChunkStore (one promotion per chunk, its tier's bytes reserved)
// and queues the copy on the executor; the copy reads SOURCE in large
// sequential requests and streams into the claim, which publishes it. Every
// other outcome (a failure, a job dropped at shutdown, an exception) undoes
// the claim: nothing partial is visible and the chunk is served from SOURCE.
#pragma once

#include <atomic>
#include <cstdint>

#include "prefetch/executor.h"
#include "tiering/chunk_store.h"
#include "tiering/counter_visitor.h"
#include "tiering/source_reader.h"

namespace tierfs {

class Promoter {
 public:
  static constexpr size_t kReadSize = 1 << 20;  // one SOURCE request

  // Everything must outlive the promoter; the executor must be shut down
  // before the store is destroyed.
  Promoter(ChunkStore* store, SourceReader* source, Executor* executor);

  // Starts promoting `key` if it is on SOURCE only. Returns true if this call
  // put it in flight (the caller may then wait on the store).
  bool Request(ChunkKey key, Executor::Lane lane);

  uint64_t requested() const { return requested_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  // requested and rejected, into the "promotions" group.
  void VisitCounters(CounterVisitor& v) const;

 private:
  void Copy(ChunkClaim& claim);

  ChunkStore* const store_;
  SourceReader* const source_;
  Executor* const executor_;
  std::atomic<uint64_t> requested_{0};  // chunks put in flight
  std::atomic<uint64_t> rejected_{0};   // the executor's lane was full
};

}  // namespace tierfs
