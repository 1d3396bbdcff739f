// OrderModel: the next-use model. The declared read orders (one stream per
// declarer: StreamPlanner) and where their readers are, including the files
// being read chunk by chunk; every change is written to the store's
// NextUseTable and the next-use policy is told of it.
//
// Thread-safe. Its lock is taken before the next-use table's stripes (and
// nothing else: Lookahead's callbacks must take no lock); the policy is
// told after it is released.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "prefetch/planners/stream_planner.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/store/catalog.h"
#include "tiering/store/eviction_policy.h"
#include "tiering/store/next_use_table.h"

namespace tierfs {

class OrderModel {
 public:
  using Clock = std::chrono::steady_clock;
  // `catalog` (null without tiers) tells files of several chunks; the
  // table (may be null) is kept up to date and `policy` (may be null) told
  // of every change. All must outlive the model.
  OrderModel(size_t nodes, size_t max_entries, const Catalog* catalog, NextUseTable* next_uses,
             BeladyPolicy* policy);

  // Declared uses count only while active (order mode).
  void SetActive(bool active);
  // What `writer` wrote to .tierfs/order. True if it declared anything.
  bool Declare(uint64_t writer, const HintParser::Result& r);
  // Forgets every declared use.
  void Clear();
  // A read of [off, off+len) of `id`; `hit`: served from a tier without
  // waiting. A read at offset 0 consumes the file's coming use; later pieces
  // of a file of several chunks move its reader on. True if a use was
  // consumed.
  bool OnRead(NodeId id, uint64_t off, uint64_t len, bool hit, Clock::time_point now);
  // Forgets the files whose reader went quiet.
  void ExpireQuiet(Clock::time_point now);

  // The files to promote next (StreamPlanner::Lookahead). `ready` and
  // `size` are called with the model's lock held.
  std::vector<NodeId> Lookahead(size_t window, uint64_t max_bytes,
                                const StreamPlanner::ReadyFn& ready,
                                const StreamPlanner::SizeFn& size);
  uint64_t min_lead() const;
  // StreamPlanner::set_show_names. REQUIRES: before the first Declare.
  void set_show_stream_names(bool show) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    planner_.set_show_names(show);
  }
  // The streams' figures (StreamPlanner::VisitCounters).
  void VisitCounters(CounterVisitor& v) const;

 private:
  // A file of several chunks being read: its occurrence was consumed at
  // offset 0, but the chunks from `chunk` on are still to be read. Without
  // this they would count as never needed again and be the first victims
  // while their reader is still on its way to them (each entry is mirrored
  // in the table: NextUseTable::SetReading). Bounded (kMaxReading); an
  // entry goes when its reader has been quiet for kReadingIdle (a read at
  // the end does not end it: read-ahead may still be fetching earlier
  // pieces).
  struct Reading {
    uint32_t chunk;       // the chunk the reader is in
    uint64_t occurrence;  // the occurrence being read (NextUses::next_id)
    Clock::time_point last;
  };
  static constexpr size_t kMaxReading = 4096;
  static constexpr auto kReadingIdle = std::chrono::seconds(1);

  // Consumes `id`'s coming use; with `chunk`, records its reader there.
  bool Consume(NodeId id, bool hit, Clock::time_point now, std::optional<uint32_t> chunk)
      EXCLUDES(mu_);
  // Forgets quiet readers, into *changed.
  void ExpireReading(Clock::time_point now, std::vector<NodeId>* changed) REQUIRES(mu_);
  // Tells the policy.
  void NotifyChanged(std::vector<NodeId>& changed) EXCLUDES(mu_);

  const Catalog* const catalog_;
  NextUseTable* const next_uses_;
  BeladyPolicy* const policy_;
  // Guards planner_ and reading_. Lock order: taken with no other lock held;
  // while held, only StreamPlanner, OrderPlan, the look-ahead's `ready` and
  // `size` callbacks (the catalog's atomics, the planner thread's own
  // memory, the snapshot: no lock) and the NextUseTable are called, the last
  // taking one of its stripes (a leaf). The policy is told of changes
  // (NotifyChanged) after it is released.
  mutable Mutex mu_;
  StreamPlanner planner_ GUARDED_BY(mu_);
  std::unordered_map<NodeId, Reading> reading_ GUARDED_BY(mu_);
  std::atomic<size_t> reading_size_{0};  // reads at offset > 0 skip mu_ when 0
};

}  // namespace tierfs
