// OrderPlan: one declared read order (one stream: a rank, a job), and where
// its reader is in it. Answers "when is file X needed next?" in O(1), which
// is what clairvoyant (Belady) eviction needs.
//
// Positions count from the start of the stream and are never reused: each
// position links to the next position of the same file; head(X) is X's
// first occurrence not yet consumed. A read of X at offset 0 consumes that
// occurrence and moves the cursor (the furthest consumed position + 1).
// Memory is per declared position (9 bytes) plus per distinct file declared
// and pending (a hash entry), not per file of the namespace. Not
// thread-safe: the caller (StreamPlanner) serializes.
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "tiering/namespace/namespace.h"
#include "tiering/store/next_use_table.h"

namespace tierfs {

class OrderPlan {
 public:
  static constexpr uint64_t kNever = NextUses::kNever;

  // `nodes` is the namespace size; `max_entries` bounds the plan's memory.
  OrderPlan(size_t nodes, size_t max_entries);

  // Appends files to the order; returns how many fitted (the rest is dropped
  // once the plan holds max_entries).
  size_t Append(const std::vector<NodeId>& files);
  // Forgets the whole order.
  void Clear();
  // A new epoch begins: every occurrence declared so far and not consumed
  // is abandoned (its reads were served by the page cache, or never came),
  // and the cursor moves to the end. Returns how many were abandoned.
  uint64_t StartEpoch();
  // The reader opened `id` (read at offset 0): consumes its next occurrence.
  // Returns false if `id` has none (not in the plan, or all consumed).
  bool Consume(NodeId id);
  // The position of the next unconsumed occurrence of `id`, or kNever.
  uint64_t NextUse(NodeId id) const;
  // The position of the occurrence after that one, or kNever.
  uint64_t FollowingUse(NodeId id) const;

  // Positions [begin(), size()) are held; earlier ones were all consumed.
  uint64_t begin() const { return base_; }
  uint64_t size() const { return base_ + seq_.size(); }
  uint64_t cursor() const { return cursor_; }
  // The file at position p (begin() <= p < size()).
  NodeId at(uint64_t p) const { return seq_[p - base_]; }
  // True if position p has not been consumed yet.
  bool pending(uint64_t p) const { return p >= base_ && !done_[p - base_]; }
  uint64_t consumed() const { return consumed_; }
  // Positions declared and not consumed.
  uint64_t outstanding() const { return size() - base_ - consumed_here_; }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  struct Ends {
    uint32_t head;  // first unconsumed occurrence (local index)
    uint32_t last;  // last occurrence appended (local index)
  };
  void ConsumeAt(uint32_t p);
  // Drops every position when all are consumed (the positions go on).
  void CompactIfDone();

  const size_t nodes_;
  const size_t max_entries_;
  uint64_t base_ = 0;  // position of seq_[0]
  std::vector<NodeId> seq_;
  std::vector<uint32_t> next_;             // next local index of the same file, or kNone
  std::vector<bool> done_;                 // per local index: consumed
  std::unordered_map<NodeId, Ends> ends_;  // files with an unconsumed occurrence
  uint64_t cursor_ = 0;
  uint64_t consumed_ = 0;       // ever
  uint64_t consumed_here_ = 0;  // among the positions held
};

}  // namespace tierfs
