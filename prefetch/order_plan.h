// OrderPlan: the declared order in which files will be read (several epochs
// may be appended), and where the reader is in it. Answers "when is file X
// needed next?" in O(1), which is what clairvoyant (Belady) eviction needs.
//
// Positions count from the start of the plan. Each position links to the
// next position of the same file; head(X) is X's first occurrence not yet
// consumed. A read of X at offset 0 consumes that occurrence and moves the
// cursor (the furthest consumed position + 1). Not thread-safe: the caller
// (Prefetcher) serializes.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "tiering/namespace.h"
#include "tiering/next_use.h"

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
  // The reader opened `id` (read at offset 0): consumes its next occurrence.
  // Returns false if `id` has none (not in the plan, or all consumed).
  bool Consume(NodeId id);
  // The position of the next unconsumed occurrence of `id`, or kNever.
  uint64_t NextUse(NodeId id) const;
  // The position of the occurrence after that one, or kNever.
  uint64_t FollowingUse(NodeId id) const;

  size_t size() const { return seq_.size(); }
  uint64_t cursor() const { return cursor_; }
  // The file at position p (p < size()).
  NodeId at(uint64_t p) const { return seq_[p]; }
  // True if position p has not been consumed yet.
  bool pending(uint64_t p) const { return Unconsumed(p); }
  uint64_t consumed() const { return consumed_; }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  bool Unconsumed(uint64_t p) const;

  const size_t max_entries_;
  std::vector<NodeId> seq_;
  std::vector<uint32_t> next_;  // next position of the same file, or kNone
  std::vector<uint32_t> head_;  // per node: first unconsumed position, or kNone
  std::vector<uint32_t> last_;  // per node: last position appended, or kNone
  std::vector<bool> done_;      // per position: consumed
  uint64_t cursor_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace tierfs
